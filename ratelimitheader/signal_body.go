package ratelimitheader

// The body a signal sees is a snippet, cut anywhere: these helpers read JSON
// leniently, without a full parser that a truncated object would defeat.

// jsonValue finds the first member "key": value in a JSON snippet, at any
// depth, and returns the value's text: the contents of a string (escapes
// left as they are) or a scalar token such as 64.57 or true. A value cut off
// by the end of the snippet is not returned: its end is unknown.
func jsonValue(b []byte, key string) (val []byte, isString, ok bool) {
	if key == "" {
		return nil, false, false
	}
	for off := 0; off < len(b); {
		i := indexString(b[off:], key)
		if i < 0 {
			return nil, false, false
		}
		start, end := off+i, off+i+len(key)
		off = start + 1
		// The key must be a whole quoted string, not part of one.
		if start == 0 || b[start-1] != '"' || (start >= 2 && b[start-2] == '\\') || end >= len(b) || b[end] != '"' {
			continue
		}
		j := skipSpace(b, end+1)
		if j >= len(b) || b[j] != ':' {
			continue
		}
		j = skipSpace(b, j+1)
		if j >= len(b) {
			return nil, false, false
		}
		if b[j] == '"' {
			for k := j + 1; k < len(b); k++ {
				switch b[k] {
				case '\\':
					k++
				case '"':
					return b[j+1 : k], true, true
				}
			}
			return nil, false, false
		}
		for k := j; k < len(b); k++ {
			switch b[k] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				if k == j {
					return nil, false, false
				}
				return b[j:k], false, true
			}
		}
		return nil, false, false
	}
	return nil, false, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// indexString is bytes.Index(b, []byte(s)) without the conversion.
func indexString(b []byte, s string) int {
	if len(s) == 0 {
		return 0
	}
	for i := 0; i+len(s) <= len(b); i++ {
		if b[i] == s[0] && string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}

// containsFold reports whether b contains lower, ignoring ASCII case; lower
// must be lower-case.
func containsFold(b []byte, lower string) bool {
	if len(lower) == 0 {
		return true
	}
	for i := 0; i+len(lower) <= len(b); i++ {
		j := 0
		for ; j < len(lower); j++ {
			c := b[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				break
			}
		}
		if j == len(lower) {
			return true
		}
	}
	return false
}
