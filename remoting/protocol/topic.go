package protocol

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Permission bits of a topic or a broker (PermName.java).
const (
	PermPriority int32 = 1 << 3
	PermRead     int32 = 1 << 2
	PermWrite    int32 = 1 << 1
	PermInherit  int32 = 1 << 0
)

// IsReadable reports whether perm allows consuming.
func IsReadable(perm int32) bool { return perm&PermRead != 0 }

// IsWriteable reports whether perm allows producing.
func IsWriteable(perm int32) bool { return perm&PermWrite != 0 }

// IsInherited reports whether perm carries the inherit bit.
func IsInherited(perm int32) bool { return perm&PermInherit != 0 }

// PermString renders perm as mqadmin does: "RW-", "R--", "-WX"...
func PermString(perm int32) string {
	b := []byte("---")
	if IsReadable(perm) {
		b[0] = 'R'
	}
	if IsWriteable(perm) {
		b[1] = 'W'
	}
	if IsInherited(perm) {
		b[2] = 'X'
	}
	return string(b)
}

// TopicFilterType is how a topic's messages are tagged (TopicFilterType.java).
type TopicFilterType string

// Topic filter types, spelled as RocketMQ's enum.
const (
	SingleTag TopicFilterType = "SINGLE_TAG"
	MultiTag  TopicFilterType = "MULTI_TAG"
)

// Valid reports whether t is one of RocketMQ's filter types.
func (t TopicFilterType) Valid() bool { return t == SingleTag || t == MultiTag }

// Defaults of a TopicConfig, as TopicConfig.java.
const (
	DefaultReadQueueNums  int32 = 16
	DefaultWriteQueueNums int32 = 16
	DefaultTopicPerm            = PermRead | PermWrite
)

// TopicConfig is a broker's configuration of one topic (TopicConfig.java).
type TopicConfig struct {
	TopicName       string          `json:"topicName"`
	ReadQueueNums   int32           `json:"readQueueNums"`
	WriteQueueNums  int32           `json:"writeQueueNums"`
	Perm            int32           `json:"perm"`
	TopicFilterType TopicFilterType `json:"topicFilterType"`
	TopicSysFlag    int32           `json:"topicSysFlag"`
	Order           bool            `json:"order"`
}

// NewTopicConfig returns a topic config with RocketMQ's defaults.
func NewTopicConfig(name string) *TopicConfig {
	return &TopicConfig{
		TopicName:       name,
		ReadQueueNums:   DefaultReadQueueNums,
		WriteQueueNums:  DefaultWriteQueueNums,
		Perm:            DefaultTopicPerm,
		TopicFilterType: SingleTag,
	}
}

// encodeLine renders the compressed-registration form of TopicConfig.encode():
// "name read write perm filterType", space separated. topicSysFlag and order
// are not part of it.
func (tc *TopicConfig) encodeLine() string {
	return tc.TopicName + " " + strconv.Itoa(int(tc.ReadQueueNums)) + " " + strconv.Itoa(int(tc.WriteQueueNums)) +
		" " + strconv.Itoa(int(tc.Perm)) + " " + string(tc.TopicFilterType)
}

func decodeTopicLine(s string) (*TopicConfig, error) {
	parts := strings.Split(s, " ")
	if len(parts) != 5 {
		return nil, fmt.Errorf("topic config %q: want 5 space-separated fields", s)
	}
	var nums [3]int32
	for i := range nums {
		n, err := strconv.ParseInt(parts[i+1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("topic config %q: field %d: %w", s, i+2, err)
		}
		nums[i] = int32(n)
	}
	ft := TopicFilterType(parts[4])
	if !ft.Valid() {
		return nil, fmt.Errorf("topic config %q: unknown filter type %q", s, parts[4])
	}
	return &TopicConfig{TopicName: parts[0], ReadQueueNums: nums[0], WriteQueueNums: nums[1], Perm: nums[2], TopicFilterType: ft}, nil
}

// DataVersion tells whether a broker's topic table changed since it was last
// sent (DataVersion.java): {"timestamp":ms,"counter":n}.
type DataVersion struct {
	Timestamp int64 `json:"timestamp"`
	Counter   int64 `json:"counter"`
}

// NewDataVersion returns a version stamped now with counter 0.
func NewDataVersion() DataVersion { return DataVersion{Timestamp: time.Now().UnixMilli()} }

// Next returns the following version: counter plus one, stamped now.
func (dv DataVersion) Next() DataVersion {
	return DataVersion{Timestamp: time.Now().UnixMilli(), Counter: dv.Counter + 1}
}

// Encode renders compact JSON.
func (dv *DataVersion) Encode() ([]byte, error) { return json.Marshal(dv) }

// DecodeDataVersion parses a DataVersion body.
func DecodeDataVersion(b []byte) (*DataVersion, error) {
	var dv DataVersion
	if err := json.Unmarshal(b, &dv); err != nil {
		return nil, wrapBody("DataVersion", err)
	}
	return &dv, nil
}

// TopicConfigSerializeWrapper is a broker's whole topic table with its version
// (TopicConfigSerializeWrapper.java); it is also the shape of topics.json.
type TopicConfigSerializeWrapper struct {
	TopicConfigTable map[string]*TopicConfig `json:"topicConfigTable"`
	DataVersion      DataVersion             `json:"dataVersion"`
}

// Encode renders compact JSON; a nil table is written as {}.
func (w *TopicConfigSerializeWrapper) Encode() ([]byte, error) {
	out := *w
	if out.TopicConfigTable == nil {
		out.TopicConfigTable = map[string]*TopicConfig{}
	}
	return json.Marshal(&out)
}

// DecodeTopicConfigSerializeWrapper parses the JSON form, as brokers older
// than 3.0.11 send in REGISTER_BROKER.
func DecodeTopicConfigSerializeWrapper(b []byte) (*TopicConfigSerializeWrapper, error) {
	var w TopicConfigSerializeWrapper
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, wrapBody("TopicConfigSerializeWrapper", err)
	}
	return &w, nil
}

// RegisterBrokerBody is the REGISTER_BROKER request body (RegisterBrokerBody.java).
// Its JSON form is
//
//	{"topicConfigSerializeWrapper":{"topicConfigTable":{...},"dataVersion":{...}},"filterServerList":[]}
//
// and its compressed form (header compressed=true) is a zlib stream of
//
//	int32 len, DataVersion JSON
//	int32 topicCount, then per topic: int32 len, "name read write perm filterType"
//	int32 len, filterServerList JSON
//
// with big-endian integers. The compressed form drops topicSysFlag and order.
type RegisterBrokerBody struct {
	TopicConfigSerializeWrapper TopicConfigSerializeWrapper `json:"topicConfigSerializeWrapper"`
	FilterServerList            []string                    `json:"filterServerList"`
}

// Limits on a compressed body, so a hostile broker cannot make us inflate or
// allocate without bound.
const (
	maxInflatedRegisterBody = 64 << 20
	maxRegisterBodyItem     = 1 << 20
)

// Encode renders the JSON form, or the zlib form when compressed is true.
func (b *RegisterBrokerBody) Encode(compressed bool) ([]byte, error) {
	if !compressed {
		out := *b
		if out.FilterServerList == nil {
			out.FilterServerList = []string{}
		}
		if out.TopicConfigSerializeWrapper.TopicConfigTable == nil {
			out.TopicConfigSerializeWrapper.TopicConfigTable = map[string]*TopicConfig{}
		}
		return json.Marshal(&out)
	}
	var buf bytes.Buffer
	zw, err := zlib.NewWriterLevel(&buf, zlib.BestCompression)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriter(zw)
	writeItem := func(p []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		_, _ = w.Write(n[:])
		_, _ = w.Write(p)
	}
	dv, err := json.Marshal(&b.TopicConfigSerializeWrapper.DataVersion)
	if err != nil {
		return nil, err
	}
	writeItem(dv)
	names := make([]string, 0, len(b.TopicConfigSerializeWrapper.TopicConfigTable))
	for name := range b.TopicConfigSerializeWrapper.TopicConfigTable {
		names = append(names, name)
	}
	sort.Strings(names)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(names)))
	_, _ = w.Write(n[:])
	for _, name := range names {
		writeItem([]byte(b.TopicConfigSerializeWrapper.TopicConfigTable[name].encodeLine()))
	}
	fs := b.FilterServerList
	if fs == nil {
		fs = []string{}
	}
	fsJSON, err := json.Marshal(fs)
	if err != nil {
		return nil, err
	}
	writeItem(fsJSON)
	if err := w.Flush(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeRegisterBrokerBody parses either form of the body.
func DecodeRegisterBrokerBody(data []byte, compressed bool) (*RegisterBrokerBody, error) {
	if !compressed {
		var b RegisterBrokerBody
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, wrapBody("RegisterBrokerBody", err)
		}
		return &b, nil
	}
	b, err := decodeCompressedRegisterBody(data)
	if err != nil {
		return nil, wrapBody("compressed RegisterBrokerBody", err)
	}
	return b, nil
}

var errItemTooLarge = errors.New("item longer than 1 MiB")

func decodeCompressedRegisterBody(data []byte) (*RegisterBrokerBody, error) {
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	r := bufio.NewReader(io.LimitReader(zr, maxInflatedRegisterBody))
	readInt := func() (int, error) {
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return 0, err
		}
		return int(int32(binary.BigEndian.Uint32(n[:]))), nil
	}
	readItem := func() ([]byte, error) {
		n, err := readInt()
		if err != nil {
			return nil, err
		}
		if n < 0 || n > maxRegisterBodyItem {
			return nil, fmt.Errorf("%w: %d", errItemTooLarge, n)
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			return nil, err
		}
		return p, nil
	}
	body := &RegisterBrokerBody{TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{TopicConfigTable: map[string]*TopicConfig{}}}
	dv, err := readItem()
	if err != nil {
		return nil, fmt.Errorf("data version: %w", err)
	}
	if err := json.Unmarshal(dv, &body.TopicConfigSerializeWrapper.DataVersion); err != nil {
		return nil, fmt.Errorf("data version: %w", err)
	}
	count, err := readInt()
	if err != nil {
		return nil, fmt.Errorf("topic count: %w", err)
	}
	if count < 0 {
		return nil, fmt.Errorf("topic count %d", count)
	}
	// The count is not trusted for allocation: each topic is read (and bounded
	// by the inflate limit) before it is stored.
	for i := range count {
		line, err := readItem()
		if err != nil {
			return nil, fmt.Errorf("topic %d of %d: %w", i, count, err)
		}
		tc, err := decodeTopicLine(string(line))
		if err != nil {
			return nil, err
		}
		body.TopicConfigSerializeWrapper.TopicConfigTable[tc.TopicName] = tc
	}
	fs, err := readItem()
	if err != nil {
		return nil, fmt.Errorf("filter server list: %w", err)
	}
	if err := json.Unmarshal(fs, &body.FilterServerList); err != nil {
		return nil, fmt.Errorf("filter server list: %w", err)
	}
	return body, nil
}

// BodyCRC32 is the checksum a broker puts in REGISTER_BROKER's bodyCrc32:
// CRC-32 (IEEE) of the body with the top bit cleared, as Java's UtilAll.crc32
// returns it. Zero tells the nameserver not to check.
func BodyCRC32(body []byte) int32 {
	return int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF)
}
