package message

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
)

// The whole-record CRC of RocketMQ 5 (MessageStoreConfig.enabledAppendPropCRC).
// A store with the option on ends every record's properties with one more
// entry, always the last one and always CRC32ReservedLength bytes:
//
//	"__CRC32#" 0x01 d0 d1 ... d9 0x02
//
// d0..d9 are ASCII digits of crc32 IEEE & 0x7FFFFFFF (UtilAll.crc32) over
// the record's first TOTALSIZE-CRC32ReservedLength bytes, least significant
// digit first, padded with '0' (MessageDecoder.createCrc32): 123 is written
// "3210000000". The CRC is taken after the commitlog has patched
// QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP, so it covers every header
// field, the body, the topic and the properties before the entry.
//
// If the properties before the entry are not empty and do not end with
// 0x02, a 0x02 is put between them and the entry
// (needAppendLastPropertySeparator). The constants below are part of the
// on-disk format.
const (
	// CRC32ReservedLength is CommitLog.CRC32_RESERVED_LEN: the length of the
	// __CRC32# entry, its separators included.
	CRC32ReservedLength = len(PropCRC32) + 1 + crcDigits + 1
	crcDigits           = 10
)

// crcEntryHead is the part of the entry before the digits.
const crcEntryHead = PropCRC32 + string(rune(NameValueSeparator))

// crcReserve is what EncodeRecordWithCRC appends; PutPropCRC fills the digits.
const crcReserve = crcEntryHead + "0000000000" + string(rune(PropertySeparator))

// Errors of the whole-record CRC.
var (
	// ErrNoPropCRC means a record's properties do not end with a __CRC32#
	// entry.
	ErrNoPropCRC = errors.New("message: record has no __CRC32# property")
	// ErrPropCRC means a record's __CRC32# property does not match the
	// record's bytes (or is not ten digits).
	ErrPropCRC = errors.New("message: record crc mismatch")
)

// HasPropCRC reports whether the encoded properties end with a __CRC32#
// entry of the reserved shape (name, 0x01, ten bytes, 0x02). Whether those
// ten bytes are digits, and right, is VerifyPropCRC's business.
func HasPropCRC(props []byte) bool {
	n := len(props)
	return n >= CRC32ReservedLength && props[n-1] == PropertySeparator &&
		string(props[n-CRC32ReservedLength:n-1-crcDigits]) == crcEntryHead
}

// PropCRC returns the whole-record CRC of rec, one record whose last
// CRC32ReservedLength bytes are its __CRC32# entry: crc32 IEEE of everything
// before the entry, masked to 31 bits.
func PropCRC(rec []byte) uint32 {
	return crc32.ChecksumIEEE(rec[:len(rec)-CRC32ReservedLength]) & 0x7FFFFFFF
}

// PutPropCRC writes the digits of the __CRC32# entry that EncodeRecordWithCRC
// reserved at the end of rec, which must be exactly one such record with its
// final header fields (the commitlog calls it under its lock once the
// offsets and store time are patched in).
func PutPropCRC(rec []byte) {
	v := PropCRC(rec)
	d := rec[len(rec)-1-crcDigits : len(rec)-1]
	for i := range d {
		d[i] = '0' + byte(v%10)
		v /= 10
	}
}

// HasPropCRC reports whether the record's properties end with a __CRC32#
// entry (see the package function HasPropCRC).
func (r *Record) HasPropCRC() bool { return HasPropCRC(r.Properties()) }

// VerifyPropCRC checks the record's __CRC32# entry against its bytes:
// ErrNoPropCRC when the properties do not end with one, ErrPropCRC when it
// does not match. It does not allocate unless it fails.
func (r *Record) VerifyPropCRC() error {
	if !r.HasPropCRC() {
		return ErrNoPropCRC
	}
	d := r.b[len(r.b)-1-crcDigits : len(r.b)-1]
	var stored uint64
	for i := len(d) - 1; i >= 0; i-- {
		if d[i] < '0' || d[i] > '9' {
			return fmt.Errorf("%w: digits %q", ErrPropCRC, d)
		}
		stored = stored*10 + uint64(d[i]-'0')
	}
	if got := PropCRC(r.b); uint64(got) != stored {
		return fmt.Errorf("%w: stored %d, computed %d", ErrPropCRC, stored, got)
	}
	return nil
}

// dropCRCTail ends the properties that start at dst[propsStart:] as the
// store writes them without enabledAppendPropCRC (appendCRCEntry does it
// with the option): as they are, except a __CRC32# entry of the reserved
// shape that ends them. Recovery would take that for the store's own CRC
// once the option is on, so a record this package writes ends with one
// only when the entry is its own. Brokers do not send properties ending so
// (they append CLUSTER): for them this is two comparisons of bytes at hand,
// inlined. A stale entry elsewhere stays, as RocketMQ keeps it without the
// option.
func dropCRCTail(dst []byte, propsStart int) []byte {
	for HasPropCRC(dst[propsStart:]) {
		dst = dst[:len(dst)-CRC32ReservedLength]
	}
	return dst
}

// appendCRCEntry drops every __CRC32# entry of the properties, as RocketMQ
// 5 deletes the property before it encodes (a message re-put from the store
// or forwarded from another broker carries a stale one), and appends the
// reserved entry, after a 0x02 when the properties do not end with one.
func appendCRCEntry(dst []byte, propsStart int) []byte {
	if bytes.Contains(dst[propsStart:], []byte(PropCRC32)) {
		dst = dropCRCEntries(dst, propsStart)
	}
	if len(dst) > propsStart && dst[len(dst)-1] != PropertySeparator {
		dst = append(dst, PropertySeparator)
	}
	return append(dst, crcReserve...)
}

// dropCRCEntries removes, in place, every entry named __CRC32# from the
// properties at dst[propsStart:], with the 0x02 that ends it.
func dropCRCEntries(dst []byte, propsStart int) []byte {
	w := propsStart
	for r := propsStart; r < len(dst); {
		end := len(dst)
		if i := bytes.IndexByte(dst[r:], PropertySeparator); i >= 0 {
			end = r + i + 1 // the separator goes with its entry
		}
		if !bytes.HasPrefix(dst[r:end], []byte(crcEntryHead)) {
			w += copy(dst[w:], dst[r:end])
		}
		r = end
	}
	return dst[:w]
}
