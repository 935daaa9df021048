package source

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
)

// BlobHash is the git object name of a file with this content, so that a
// working tree and a commit give the same hash for the same file.
func BlobHash(data []byte) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}
