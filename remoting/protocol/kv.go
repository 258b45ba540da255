package protocol

import "encoding/json"

// KVTable is a flat string map, the body of GET_KVLIST_BY_NAMESPACE and of the
// REGISTER_BROKER response (KVTable.java): {"table":{"k":"v"}}.
type KVTable struct {
	Table map[string]string `json:"table"`
}

// Encode renders compact JSON; a nil table is written as {}.
func (t *KVTable) Encode() ([]byte, error) {
	out := *t
	if out.Table == nil {
		out.Table = map[string]string{}
	}
	return json.Marshal(&out)
}

// DecodeKVTable parses a KVTable body.
func DecodeKVTable(b []byte) (*KVTable, error) {
	var t KVTable
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, wrapBody("KVTable", err)
	}
	return &t, nil
}
