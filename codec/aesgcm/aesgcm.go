// Package aesgcm is an AES-GCM payload codec with key rotation by key id. A payload is sealed
// under the current key and stored with its id ("aesgcm/<key id>"), so a run that started under
// an old key replays after a rotation as long as the old key stays in the codec for decoding.
//
// The nonce is random (96 bits) per payload. The payload's codec id is authenticated as
// additional data, so a ciphertext moved under another key id does not decrypt.
package aesgcm

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"github.com/ultimat3/jobs/codec"
)

// Prefix starts the id of every payload this codec writes.
const Prefix = "aesgcm/"

// Codec is an AES-GCM codec; build it with New.
type Codec struct {
	current string
	aeads   map[string]cipher.AEAD
}

// New returns a codec that encrypts under keys[current] and decrypts under any key of keys. Keys
// are 16, 24 or 32 bytes (AES-128, -192, -256); key ids are short printable names ("k1",
// "2026-03").
func New(current string, keys map[string][]byte) (*Codec, error) {
	if _, ok := keys[current]; !ok {
		return nil, fmt.Errorf("aesgcm: the current key %q is not among the keys", current)
	}
	c := &Codec{current: current, aeads: map[string]cipher.AEAD{}}
	for id, k := range keys {
		// The payload's codec id is Prefix+id, so the key id takes Seal's rule (printable UTF-8:
		// an id of other bytes, or with an invisible character, read like another key's in
		// every view) and, as before, no space and at most 200 bytes.
		if !codec.ValidID(Prefix+id) || id == "" || len(id) > 200 || strings.ContainsRune(id, ' ') {
			return nil, fmt.Errorf("aesgcm: key id %q: want 1 to 200 bytes of printable UTF-8, no space", id)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("aesgcm: key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		c.aeads[Prefix+id] = aead
	}
	return c, nil
}

// ID implements codec.Codec: "aesgcm/<current key id>".
func (c *Codec) ID() string { return Prefix + c.current }

// Handles implements codec.Codec: any key this codec holds.
func (c *Codec) Handles(id string) bool { _, ok := c.aeads[id]; return ok }

// Encrypts marks the codec's output as ciphertext.
func (c *Codec) Encrypts() bool { return true }

// Encode implements codec.Codec: nonce || ciphertext+tag.
func (c *Codec) Encode(plain []byte) ([]byte, error) {
	aead := c.aeads[c.ID()]
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, err
	}
	return aead.Seal(out, out, plain, []byte(c.ID())), nil
}

// Decode implements codec.Codec.
func (c *Codec) Decode(id string, data []byte) ([]byte, error) {
	aead, ok := c.aeads[id]
	if !ok {
		return nil, fmt.Errorf("aesgcm: no key for %s", id)
	}
	if len(data) < aead.NonceSize()+aead.Overhead() {
		return nil, errors.New("aesgcm: ciphertext too short")
	}
	n := aead.NonceSize()
	plain, err := aead.Open(nil, data[:n], data[n:], []byte(id))
	if err != nil {
		return nil, fmt.Errorf("aesgcm: %s: %w (wrong key, or the payload was altered)", id, err)
	}
	return plain, nil
}
