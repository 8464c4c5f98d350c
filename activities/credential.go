package activities

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// An attempt credential proves to the API that its holder runs a build
// attempt: the executor that claims an attempt generates one at random, sends
// only its SHA-256 (CredentialHash) with the claim, which the build workflow
// records on the attempt, and presents the credential itself to the API when
// it fetches the build's secrets and ships its logs. The credential never
// enters Temporal (no payload, history or memo holds it), so neither a
// worker token shared by every executor nor Temporal's history lets anyone
// else act for the attempt.

// credentialBytes is the credential's entropy.
const credentialBytes = 32

// NewAttemptCredential returns a fresh random credential and its hash.
func NewAttemptCredential() (credential, hash string, err error) {
	b := make([]byte, credentialBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("generate the attempt credential: %w", err)
	}
	credential = base64.RawURLEncoding.EncodeToString(b)
	return credential, CredentialHash(credential), nil
}

// CredentialHash is the hash of an attempt credential the build workflow
// records: hex SHA-256.
func CredentialHash(credential string) string {
	sum := sha256.Sum256([]byte(credential))
	return hex.EncodeToString(sum[:])
}

// ValidCredentialHash reports whether h looks like a CredentialHash.
func ValidCredentialHash(h string) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}
