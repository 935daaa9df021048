package main

import (
	"slices"
	"testing"
	"time"
)

func TestLeaderWindowsSplitOneProcessByTime(t *testing.T) {
	at := func(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }
	all := []sample{
		{at: at(1), pid: 1, leader: true},
		{at: at(2), pid: 2, leader: true},  // another process
		{at: at(3), pid: 1, leader: false}, // not leading
		{at: at(4), pid: 1, leader: true},
		{at: at(6.5), pid: 1, leader: true},
		{at: at(17), pid: 1, leader: true}, // 10 – 15 empty, left out
	}
	ws := leaderWindows(all, 1, 5*time.Minute)
	var got []int
	for _, w := range ws {
		got = append(got, len(w))
	}
	if want := []int{2, 1, 1}; !slices.Equal(got, want) {
		t.Fatalf("windows of %v samples, want %v", got, want)
	}
	if ws[2][0].at != at(17) {
		t.Errorf("the last window holds the sample at %s", ws[2][0].at)
	}
}
