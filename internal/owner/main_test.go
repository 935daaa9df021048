package owner

import (
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

var cp *testenv.ControlPlane

// TestMain starts the control plane the peer tests run the real Flux
// controllers against.
func TestMain(m *testing.M) { testenv.RunWithControlPlane(m, &cp) }
