package render

import (
	"time"

	"github.com/Masterminds/sprig/v3"
)

// timeFuncs are sprig's date functions with the generated time in place of
// the clock, and UTC in place of the machine's zone: a CI runner and a
// laptop in another zone render the same bytes.
func (gen *generator) timeFuncs() map[string]any {
	sp := sprig.TxtFuncMap()
	// when is what a date function was given, or now when it was given
	// nothing it reads as a time (sprig's own rule).
	when := func(date any) (time.Time, error) {
		switch d := date.(type) {
		case time.Time:
			return d, nil
		case *time.Time:
			return *d, nil
		case int64:
			return time.Unix(d, 0), nil
		case int:
			return time.Unix(int64(d), 0), nil
		case int32:
			return time.Unix(int64(d), 0), nil
		}
		return gen.now()
	}
	inZone := func(format string, date any, zone string) (string, error) {
		t, err := when(date)
		if err != nil {
			return "", err
		}
		loc := time.UTC
		if zone != "Local" {
			if l, err := time.LoadLocation(zone); err == nil {
				loc = l
			}
		}
		return t.In(loc).Format(format), nil
	}
	round := sp["durationRound"].(func(any) string)
	return map[string]any{
		"date":       func(format string, date any) (string, error) { return inZone(format, date, "UTC") },
		"dateInZone": inZone, "date_in_zone": inZone,
		"htmlDate":       func(date any) (string, error) { return inZone("2006-01-02", date, "UTC") },
		"htmlDateInZone": func(date any, zone string) (string, error) { return inZone("2006-01-02", date, zone) },
		"ago": func(date any) (string, error) {
			t, err := when(date)
			if err != nil {
				return "", err
			}
			now, err := gen.now()
			if err != nil {
				return "", err
			}
			return now.Sub(t).Round(time.Second).String(), nil
		},
		"durationRound": func(d any) (string, error) {
			t, ok := d.(time.Time)
			if !ok {
				return round(d), nil
			}
			now, err := gen.now()
			if err != nil {
				return "", err
			}
			return round(int64(now.Sub(t))), nil
		},
		"toDate": func(format, s string) time.Time {
			t, _ := time.ParseInLocation(format, s, time.UTC)
			return t
		},
		"mustToDate": func(format, s string) (time.Time, error) { return time.ParseInLocation(format, s, time.UTC) },
	}
}
