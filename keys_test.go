package headway

import (
	"testing"
	"unsafe"
)

// A key costs little memory until its server says something worth
// remembering: an unbounded number of keys stays cheap between sweeps.
func TestAKeyIsSmall(t *testing.T) {
	if size := unsafe.Sizeof(keyState{}); size > 1024 {
		t.Errorf("keyState is %d bytes", size)
	}
}
