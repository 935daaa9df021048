package session

import (
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { testenv.RunWithControlPlane(m, &cp) }
