package store

import (
	bolt "go.etcd.io/bbolt"
)

// OpenUnproved opens a store for writing the way Open did before stores
// were proved first: bbolt's open alone (its free-list walk included), for
// the benchmark to measure side by side.
func OpenUnproved(path string) (*DB, error) {
	b, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	return &DB{bolt: b, path: path, heads: map[string]*chunk{}, touched: map[string]int64{}}, nil
}
