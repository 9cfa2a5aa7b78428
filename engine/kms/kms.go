// Package kms holds the master keys `strata server` seals objects' data
// keys with for server-side encryption with managed keys (SSE-S3 and
// SSE-KMS): named 256-bit keys read from a file (a mounted Secret) and
// reloaded when it changes. Data keys are never stored in the clear and the
// master keys never on the drives; an object names the key that sealed its
// data key, so a new default key can be added without rewriting anything
// (older objects keep opening with the key they name, which must stay in
// the file).
package kms

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/keysfile"
)

// The keys file's format is defined once, in engine/keysfile, which the
// operator (which writes the file) may import.
const (
	EnvKeysFile = keysfile.EnvVar
	KeySize     = keysfile.KeySize
)

// File is the keys file (keysfile.File).
type File = keysfile.File

// Parse decodes and checks a keys file (keysfile.Parse).
func Parse(data []byte) (map[string][]byte, string, error) { return keysfile.Parse(data) }

// Keys are the master keys, reloaded from their file.
type Keys struct {
	path string
	log  *slog.Logger

	mu   sync.RWMutex
	keys map[string][]byte
	def  string
	sum  [32]byte
}

// Load reads the keys file at path.
func Load(path string, log *slog.Logger) (*Keys, error) {
	k := &Keys{path: path, log: log}
	if err := k.reload(); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *Keys) reload() error {
	data, err := os.ReadFile(k.path)
	if err != nil {
		return fmt.Errorf("keys file: %w", err)
	}
	sum := sha256.Sum256(data)
	k.mu.RLock()
	same := sum == k.sum
	k.mu.RUnlock()
	if same {
		return nil
	}
	keys, def, err := Parse(data)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.keys, k.def, k.sum = keys, def, sum
	k.mu.Unlock()
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	k.log.Info("encryption keys loaded", "file", k.path, "keys", ids, "default", def)
	return nil
}

// Watch re-reads the file every interval until stop closes; a broken file
// is reported and the previous keys kept.
func (k *Keys) Watch(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := k.reload(); err != nil {
				k.log.Error("keys file not reloaded; keeping the previous keys", "err", err)
			}
		}
	}
}

// Key returns a master key by ID.
func (k *Keys) Key(id string) ([]byte, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	key, ok := k.keys[id]
	return key, ok
}

// Default is the ID of the key used when a request names none.
func (k *Keys) Default() string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.def
}
