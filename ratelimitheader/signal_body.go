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

// jsonMembers calls fn for each member "key": value of a JSON snippet, at
// any depth and in order, with the key's text and the value's as jsonValue
// gives them; an object or array value is not passed, its members are. A
// string is never taken for a key unless a colon follows it, so text inside
// a string value is not read as members. The walk stops where the snippet
// is cut off, or when fn returns false.
func jsonMembers(b []byte, fn func(key, val []byte, isString bool) bool) {
	for i := 0; i < len(b); {
		if b[i] != '"' {
			i++
			continue
		}
		end := stringEnd(b, i)
		if end < 0 {
			return
		}
		key := b[i+1 : end]
		j := skipSpace(b, end+1)
		if j >= len(b) {
			return
		}
		if b[j] != ':' {
			i = end + 1 // a string value, or an array's member
			continue
		}
		j = skipSpace(b, j+1)
		if j >= len(b) {
			return
		}
		switch b[j] {
		case '"':
			vend := stringEnd(b, j)
			if vend < 0 {
				return
			}
			if !fn(key, b[j+1:vend], true) {
				return
			}
			i = vend + 1
		case '{', '[':
			i = j // its members are the next to be walked
		default:
			k := j
			for k < len(b) && !isJSONDelim(b[k]) {
				k++
			}
			if k == len(b) {
				return // cut off: the value's end is unknown
			}
			if k > j && !fn(key, b[j:k], false) {
				return
			}
			i = k
		}
	}
}

// stringEnd returns the index of the quote that closes the JSON string
// opening at b[start], or -1 if the snippet ends first.
func stringEnd(b []byte, start int) int {
	for k := start + 1; k < len(b); k++ {
		switch b[k] {
		case '\\':
			k++
		case '"':
			return k
		}
	}
	return -1
}

func isJSONDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}
