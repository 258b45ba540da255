// Package client is the Go SDK of gorocketmq: a producer, a transaction
// producer, push and pull consumers and an admin API that speak RocketMQ
// 4.x's remoting protocol, so they work against our servers and against
// Apache RocketMQ's.
//
// Its shapes follow apache/rocketmq-client-go/v2 (NewProducer, SendSync,
// SendAsync, SendOneWay, NewPushConsumer, Subscribe, With* options) so users of
// that SDK feel at home, and it avoids that SDK's known traps:
//
//   - a message with a sharding key always goes to the queue its key hashes
//     to, unless a custom selector is set (the official default ignores it);
//   - the clientId is unique per client object by default, not ip@pid, so
//     containers and two clients in one process do not collide;
//   - there is no package-level state: every goroutine, connection and timer
//     belongs to a client object and Shutdown stops them all;
//   - a broker that timed out is avoided for a while, and each send attempt
//     gets its own timeout so a retry can still reach another broker;
//   - SYSTEM_BUSY answers are retried with backoff;
//   - logging goes to the logrus.FieldLogger you pass (WithLogger), warnings
//     and above to stderr otherwise, never to files under $HOME.
//
// Everything an object does runs on goroutines it owns; methods are safe for
// concurrent use unless their doc says otherwise.
package client
