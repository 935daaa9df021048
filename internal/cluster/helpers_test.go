package cluster

import "sluice.dev/sluice/internal/testenv"

func testenvNS(prefix string) string { return testenv.Namespace(prefix) }
