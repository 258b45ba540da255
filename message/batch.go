package message

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Producer batch body (SEND_BATCH_MESSAGE), one sub-record per message:
//
//	size  field
//	   4  TOTALSIZE (this sub-record)
//	   4  MAGICCODE (0)
//	   4  BODYCRC (0)
//	   4  FLAG
//	   4  BODYLEN
//	   n  BODY
//	   2  PROPLEN
//	   p  PROPERTIES
const batchFixedLength = 4 + 4 + 4 + 4 + 4 + 2

// ErrBadBatch means a producer batch body is malformed.
var ErrBadBatch = errors.New("message: malformed batch body")

// BatchItem is one message of a producer batch, viewed in place.
type BatchItem struct {
	Flag       int32
	Body       []byte
	Properties []byte // encoded properties string
}

// WalkBatch calls fn for each sub-message of a producer batch body, without
// copying. It stops at the first malformed sub-record or at fn's error.
// TOTALSIZE must equal the sub-record's real length.
func WalkBatch(body []byte, fn func(BatchItem) error) error {
	be := binary.BigEndian
	for off := 0; off < len(body); {
		b := body[off:]
		if len(b) < batchFixedLength {
			return fmt.Errorf("%w: %d trailing bytes at %d", ErrBadBatch, len(b), off)
		}
		size := int(int32(be.Uint32(b)))
		if size < batchFixedLength || size > len(b) {
			return fmt.Errorf("%w: total size %d at %d, %d bytes left", ErrBadBatch, size, off, len(b))
		}
		b = b[:size]
		it := BatchItem{Flag: int32(be.Uint32(b[12:]))}
		bodyLen := int(int32(be.Uint32(b[16:])))
		if bodyLen < 0 || bodyLen > size-batchFixedLength {
			return fmt.Errorf("%w: body length %d at %d", ErrBadBatch, bodyLen, off)
		}
		it.Body = b[20 : 20+bodyLen : 20+bodyLen]
		p := 20 + bodyLen
		propsLen := int(int16(be.Uint16(b[p:])))
		if propsLen < 0 || p+2+propsLen != size {
			return fmt.Errorf("%w: properties length %d at %d", ErrBadBatch, propsLen, off)
		}
		it.Properties = b[p+2 : size]
		if err := fn(it); err != nil {
			return err
		}
		off += size
	}
	return nil
}

// UnmarshalBatch decodes a producer batch body into messages of topic; bodies
// are copied.
func UnmarshalBatch(topic string, body []byte) ([]*Message, error) {
	var out []*Message
	err := WalkBatch(body, func(it BatchItem) error {
		out = append(out, &Message{
			Topic:      topic,
			Flag:       it.Flag,
			Body:       append([]byte{}, it.Body...),
			Properties: UnmarshalProperties(it.Properties),
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendBatch appends msgs in the producer batch encoding to dst.
func AppendBatch(dst []byte, msgs []*Message) ([]byte, error) {
	be := binary.BigEndian
	for _, m := range msgs {
		start := len(dst)
		dst = be.AppendUint32(dst, 0) // TOTALSIZE, patched below
		dst = be.AppendUint32(dst, 0) // MAGICCODE
		dst = be.AppendUint32(dst, 0) // BODYCRC
		dst = be.AppendUint32(dst, uint32(m.Flag))
		dst = be.AppendUint32(dst, uint32(len(m.Body)))
		dst = append(dst, m.Body...)
		dst = be.AppendUint16(dst, 0)
		propsStart := len(dst)
		dst = AppendProperties(dst, m.Properties)
		propsLen := len(dst) - propsStart
		if propsLen > MaxPropertiesLength {
			return dst[:start], fmt.Errorf("%w: %d", ErrPropertiesTooLong, propsLen)
		}
		be.PutUint16(dst[propsStart-2:], uint16(propsLen))
		be.PutUint32(dst[start:], uint32(len(dst)-start))
	}
	return dst, nil
}

// EncodeBatchRecords appends one v1 commitlog record per sub-message of
// batch.Body to dst, as CommitLog.MessageExtEncoder.encode(MessageExtBatch)
// does: each record gets the batch's topic, queue id, sysflag, hosts, born
// time and reconsume times, its own flag, body and body CRC, and the properties
// sub-properties + 0x02 (when both are non-empty and the first does not end in
// 0x02) + batch properties, ended as EncodeRecord ends them. Queue and
// physical offsets are written from the batch (normally 0) for the
// commitlog to patch. maxRecord > 0 refuses a record longer than maxRecord
// bytes. It returns the number of records; on error dst is returned
// unchanged.
func EncodeBatchRecords(dst []byte, batch *MessageExtBatch, maxRecord int) ([]byte, int, error) {
	return encodeBatchRecords(dst, batch, maxRecord, false)
}

// EncodeBatchRecordsWithCRC is EncodeBatchRecords for a store with
// enabledAppendPropCRC: each record ends its properties as
// EncodeRecordWithCRC does, with its own __CRC32# entry reserved last, for
// PutPropCRC to fill record by record. (RocketMQ 5 reserves the entry
// without checking the separator before it in a batch; a record here always
// gets one, so its properties parse.)
func EncodeBatchRecordsWithCRC(dst []byte, batch *MessageExtBatch, maxRecord int) ([]byte, int, error) {
	return encodeBatchRecords(dst, batch, maxRecord, true)
}

func encodeBatchRecords(dst []byte, batch *MessageExtBatch, maxRecord int, withCRC bool) ([]byte, int, error) {
	start := len(dst)
	m := &batch.MessageExt
	sysFlag := hostFlags(m.SysFlag, m.BornHost, m.StoreHost)
	// The batch-level properties are encoded once and copied into each record.
	bp := MarshalProperties(m.Properties)
	if len(bp) > MaxPropertiesLength {
		return dst, 0, fmt.Errorf("%w: batch properties %d", ErrPropertiesTooLong, len(bp))
	}
	n := 0
	err := WalkBatch(m.Body, func(it BatchItem) error {
		recStart := len(dst)
		var err error
		dst, err = appendRecordHead(dst, &batch.MessageExt, sysFlag, it.Flag, it.Body, 0)
		if err != nil {
			return err
		}
		propsStart := len(dst)
		dst = append(dst, it.Properties...)
		if len(it.Properties) > 0 && len(bp) > 0 && it.Properties[len(it.Properties)-1] != PropertySeparator {
			dst = append(dst, PropertySeparator)
		}
		dst = append(dst, bp...)
		if withCRC {
			dst = appendCRCEntry(dst, propsStart)
		} else {
			dst = dropCRCTail(dst, propsStart)
		}
		if dst, err = finishRecord(dst, recStart, propsStart); err != nil {
			return err
		}
		if maxRecord > 0 && len(dst)-recStart > maxRecord {
			return fmt.Errorf("%w: record of %d bytes over %d", ErrRecordTooLarge, len(dst)-recStart, maxRecord)
		}
		n++
		return nil
	})
	if err != nil {
		return dst[:start], 0, err
	}
	if n == 0 {
		return dst[:start], 0, fmt.Errorf("%w: no messages", ErrBadBatch)
	}
	return dst, n, nil
}
