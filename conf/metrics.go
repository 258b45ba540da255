package conf

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Metrics exporter types (RocketMQ 5's MetricsExporterType). Only PROM is
// served; OTLP_GRPC and LOG are refused by Validate rather than ignored.
const (
	MetricsExporterDisable = "DISABLE"
	MetricsExporterProm    = "PROM"
)

// MetricsConfig switches on the Prometheus endpoint with RocketMQ 5's keys:
// metricsExporterType=PROM serves /metrics over HTTP on
// metricsPromExporterHost:metricsPromExporterPort.
type MetricsConfig struct {
	// MetricsExporterType is DISABLE (the default) or PROM.
	MetricsExporterType string `mapstructure:"metricsExporterType"`
	// MetricsPromExporterHost is the address to listen on; empty means the
	// server's own address (brokerIP1 for a broker, bindAddress for a
	// nameserver), as RocketMQ 5 does.
	MetricsPromExporterHost string `mapstructure:"metricsPromExporterHost"`
	// MetricsPromExporterPort is the HTTP port (RocketMQ 5's default 5557;
	// 0 picks a free one).
	MetricsPromExporterPort int `mapstructure:"metricsPromExporterPort"`
}

// DefaultMetricsConfig is the exporter off, port 5557 when switched on.
func DefaultMetricsConfig() MetricsConfig {
	return MetricsConfig{MetricsExporterType: MetricsExporterDisable, MetricsPromExporterPort: 5557}
}

// PromEnabled reports whether /metrics is to be served.
func (c *MetricsConfig) PromEnabled() bool {
	return strings.EqualFold(strings.TrimSpace(c.MetricsExporterType), MetricsExporterProm)
}

// PromListenAddr is host:port for the endpoint; defaultHost stands in for
// an empty metricsPromExporterHost.
func (c *MetricsConfig) PromListenAddr(defaultHost string) string {
	host := strings.TrimSpace(c.MetricsPromExporterHost)
	if host == "" {
		host = defaultHost
	}
	return net.JoinHostPort(host, strconv.Itoa(c.MetricsPromExporterPort))
}

func (c *MetricsConfig) validate() error {
	switch t := strings.ToUpper(strings.TrimSpace(c.MetricsExporterType)); t {
	case "", MetricsExporterDisable, MetricsExporterProm:
	case "OTLP_GRPC", "LOG":
		return fmt.Errorf("%w: metricsExporterType=%s is not supported: use PROM (Prometheus on metricsPromExporterPort) or DISABLE", ErrBadValue, c.MetricsExporterType)
	default:
		return fmt.Errorf("%w: metricsExporterType=%s must be DISABLE or PROM", ErrBadValue, c.MetricsExporterType)
	}
	if c.MetricsPromExporterPort < 0 || c.MetricsPromExporterPort > 65535 {
		return fmt.Errorf("%w: metricsPromExporterPort=%d is not a port (0-65535)", ErrBadValue, c.MetricsPromExporterPort)
	}
	return nil
}
