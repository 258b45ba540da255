// Package timer keeps messages with an arbitrary delivery time (RocketMQ 5's
// timer messages: TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS,
// __STARTDELIVERTIME) until they are due, with memory bounded by the time
// span covered, not by the number of pending messages.
//
// The messages themselves stay in the commitlog (topic rmq_sys_wheel_timer,
// written by the broker); this package holds only 56-byte references to
// them, in two structures:
//
// Timerlog (on disk, memory-mapped). Append-only files of fixed size named by
// their 20-digit start position, under <root>/timerlog. One unit per
// reference, big-endian, part of the on-disk format:
//
//	 0  4  magic   0x544D5231 ("TMR1"); 0 ends the written part of a file
//	 4  4  flags   1 = done (delivered, rolled or dropped), 2 = roll,
//	               4 = cancel marker (Entry.Cancel)
//	 8  8  deliverMs       when the message is due (unix ms)
//	16  8  fireMs          when this unit is looked at: deliverMs, or for a
//	                       roll unit the end of the roll window
//	24  8  commitLogOffset of the stored message
//	32  8  queueOffset     in the timer topic's consume queue
//	40  8  prevPos         previous unit in the same wheel slot, -1 none
//	48  4  size            of the stored message
//	52  4  reserved
//
// Wheel (in memory). An array of 2*RollWindow/Precision slots (172,800 slots,
// 4 MiB, for the defaults of 1 s and 24 h); slot i holds the last unit whose
// fireMs falls in the slot's precision interval, and the units of one slot
// are chained backwards through prevPos. Because no unit fires more than one
// roll window ahead (a later delivery time is written as a roll unit that
// fires at the end of the window and is then appended again, RocketMQ 5's
// ROLL), and the wheel spans two windows, two live revolutions never share a
// slot: a slot whose time differs from the new unit's is stale and simply
// restarts.
//
// When a slot's time comes its chain is read into a small batch sorted by
// deliverMs, and each unit is handed over at its exact millisecond (slots
// only group the work; delivery is not rounded to the precision). A unit
// handed over is marked done in place.
//
// Cancels. A cancel marker (RocketMQ 5's TIMER_DEL_UNIQKEY message) is a
// unit like any other, flagged 4; the wheel does not know what it cancels.
// The broker keeps the set of pending cancels in memory and rebuilds it at
// Open from the markers still pending (RecoveredCancels), so the timerlog is
// the cancel's durable state. Markers of one millisecond are handed over
// after the other units of that millisecond: the message a marker cancels,
// due at the marker's time, is always decided while the marker is pending.
//
// Restart. The wheel is not persisted: Open walks the timerlog files still
// present and links every unit not marked done back into the wheel (or into
// the batch when it is already due). A file is deleted by the first Flush
// after none of its units is pending, never before the checkpoint covers
// its queue offsets (its units tell Open which messages were read already);
// a unit is never pending longer than a roll window
// after it was appended, so the walk covers about one roll window of
// appends. The caller's read position in the timer topic (EnqueueOffset) is
// written to <root>/timercheck only after the timerlog is synced, so after
// a crash every message is either in the timerlog or read again; units
// already in the log are recognised by their queue offset and not added
// twice. A unit delivered but not yet synced as done can be delivered again
// after a power loss: at-least-once, bounded by the flush interval.
// timercheck is written with its previous version kept as timercheck.bak; a
// damaged timercheck is replaced by the .bak, whose older read position can
// only make messages be read, and delivered, again, never skipped.
//
// Memory. 1,000,000 pending messages are 56 MB of timerlog (page cache,
// mapped) and no heap objects; the heap holds the wheel array and the batch
// of the current slot. See BenchmarkWheelMillionPending.
//
// A Wheel is not safe for concurrent use: one goroutine (the broker's
// timerLoop) owns it.
package timer
