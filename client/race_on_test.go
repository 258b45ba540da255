//go:build race

package client

// raceEnabled: under the race detector sync.Pool drops items at random, so
// allocation counts are not what they are in production.
const raceEnabled = true
