package controller

// childEnv, set, makes the test binary a controller process of its own
// (see TestKilledMidPush).
const childEnv = "SLUICE_TEST_CONTROLLER"

func child() int { return 0 }
