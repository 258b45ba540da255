package e2e

import (
	"os"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// TestMain quiets the official client, which logs every rebalance and pull
// at info level (set E2E_CLIENT_LOG=info or debug to see it), and turns the
// binary into the client driver when the tests start it as one.
func TestMain(m *testing.M) {
	level := os.Getenv("E2E_CLIENT_LOG")
	if level == "" {
		level = "error"
	}
	rlog.SetLogLevel(level)
	if os.Getenv(envDriver) != "" {
		os.Exit(runDriver(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}
