package config

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/scanner"
	"github.com/goccy/go-yaml/token"
)

// readYAML turns a config's bytes into the generic tree the reader walks
// (yaml.MapSlice, []any and scalars), within the input limits.
//
// goccy/go-yaml v1.19.2 is not safe on hostile input by itself, so the
// document goes through three stages:
//
//  1. The places a token may start are counted on the bytes (the scanner
//     costs about 300 bytes per token and takes the whole document at
//     once); then the tokens are scanned and their shape is checked
//     before the parser sees them: at most MaxTokens tokens, nesting at
//     most MaxDepth deep, at most MaxMappingKeys keys in one mapping and
//     MaxListEntries entries in one block list. The parser recurses once
//     per sibling key of a block mapping and copies the keys after it at
//     each level (40,000 keys: 34 s and 6 GB); its time grows with the
//     square of a block list's length (150,000 empty entries: 7.7 s) and
//     its memory with the square of the nesting depth (16,000 levels:
//     400 MB).
//  2. The parsed tree is checked before decoding: every mapping key is a
//     plain string (the decoder turns any other key, an alias to a
//     billion-laughs list included, into text with fmt.Sprint: 415 bytes
//     took 18 s and 1 GB), and the nodes that aliases stand for, counted
//     as if every alias were expanded, are at most MaxAliasNodes in all
//     (the decoder re-reads an anchor for each merge key that names it).
//  3. The decoder turns the tree into values; plain aliases share the
//     anchor's decoded value.
func readYAML(data []byte) (any, Errors) {
	if n := tokenStarts(data); n > MaxTokens {
		return nil, Errors{{Path: "(root)", Msg: fmt.Sprintf("about %d YAML tokens (values, keys and punctuation), more than %d: too big for a config", n, MaxTokens)}}
	}
	tokens, fe := scanTokens(string(data))
	if fe != nil {
		return nil, Errors{*fe}
	}
	f, err := parser.Parse(tokens, 0)
	if err != nil {
		return nil, Errors{{Path: "(root)", Msg: "invalid YAML: " + yamlError(err)}}
	}
	var body ast.Node
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if body != nil {
			return nil, Errors{{Path: "(root)", Msg: "the file must hold one YAML document, not several"}}
		}
		body = d.Body
	}
	if body == nil {
		return nil, nil
	}
	ck := &treeCheck{anchors: map[string]int{}, defining: map[string]bool{}}
	ck.node("", body)
	if len(ck.errs) > 0 {
		return nil, ck.errs
	}
	var root any
	if err := yaml.NodeToValue(body, &root, yaml.UseOrderedMap()); err != nil && !errors.Is(err, io.EOF) {
		return nil, Errors{{Path: "(root)", Msg: "invalid YAML: " + yamlError(err)}}
	}
	return root, nil
}

// yamlError is the library's message, without source lines, cut short: it
// may quote a key or a value of the file.
func yamlError(err error) string {
	return cut(strings.TrimSpace(yaml.FormatError(err, false, false)), 300)
}

// cut shortens s to at most n bytes (on a rune boundary), marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}

// tokenStarts counts the places in data where a token may start: the
// indicator characters, and the words after blanks. It is about the
// number of tokens the scanner makes (an empty value is a token without
// a character), and it is cheap, so that what
// scanning would cost is known before: the scanner takes a whole document
// at once, at about 300 bytes per token.
func tokenStarts(data []byte) int {
	n := 0
	word := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '#' && (i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n' || data[i-1] == '\r') {
			// a comment: one token to the end of the line
			for i < len(data) && data[i] != '\n' {
				i++
			}
			n++
			word = false
			continue
		}
		switch c {
		case '[', ']', '{', '}', ',', ':', '-', '?', '&', '*', '!', '|', '>', '\'', '"', '#', '%', '@', '`':
			n++
			word = false
		case ' ', '\t', '\n', '\r':
			word = false
		default:
			if !word {
				n++
				word = true
			}
		}
	}
	return n
}

// frame is one open collection while scanning: a flow one ([ or {), or a
// block one at a column.
type frame struct {
	flow bool
	seq  bool
	col  int
	keys int // keys of a mapping, entries of a block list
}

// scanTokens tokenizes src and checks its shape on the way (stage 1 of
// readYAML). Line numbers in the problems are the file's.
func scanTokens(src string) (token.Tokens, *FieldError) {
	var s scanner.Scanner
	s.Init(src)
	var tokens token.Tokens
	var stack []frame
	fail := func(tk *token.Token, format string, args ...any) *FieldError {
		return &FieldError{Path: "(root)", Msg: fmt.Sprintf("line %d: ", tk.Position.Line) + fmt.Sprintf(format, args...)}
	}
	// closeBlock pops the block frames a token at col ends: deeper ones,
	// and (for a key) a list at the same column, which was the value of
	// the previous key.
	closeBlock := func(col int, key bool) {
		for len(stack) > 0 {
			top := stack[len(stack)-1]
			if top.flow || top.col < col || (top.col == col && !(key && top.seq)) {
				return
			}
			stack = stack[:len(stack)-1]
		}
	}
	open := func(fr frame) {
		stack = append(stack, fr)
	}
	for {
		group, err := s.Scan()
		if errors.Is(err, io.EOF) {
			break
		}
		for _, tk := range group {
			tokens.Add(tk)
			if len(tokens) > MaxTokens {
				return nil, fail(tk, "more than %d YAML tokens (values, keys and punctuation): too big for a config", MaxTokens)
			}
			inFlow := len(stack) > 0 && stack[len(stack)-1].flow
			switch tk.Type {
			case token.DocumentHeaderType, token.DocumentEndType:
				stack = stack[:0]
			case token.SequenceStartType, token.MappingStartType:
				open(frame{flow: true, seq: tk.Type == token.SequenceStartType})
			case token.SequenceEndType, token.MappingEndType:
				for len(stack) > 0 {
					top := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					if top.flow {
						break
					}
				}
			case token.SequenceEntryType:
				if inFlow {
					break
				}
				col := tk.Position.Column
				closeBlock(col, false)
				if n := len(stack); n > 0 && !stack[n-1].flow && stack[n-1].seq && stack[n-1].col == col {
					stack[n-1].keys++
					if stack[n-1].keys > MaxListEntries {
						return nil, fail(tk, "a list has more than %d entries", MaxListEntries)
					}
					break
				}
				open(frame{seq: true, col: col, keys: 1})
			case token.MappingValueType:
				if inFlow {
					if top := &stack[len(stack)-1]; !top.seq {
						top.keys++
						if top.keys > MaxMappingKeys {
							return nil, fail(tk, "a mapping has more than %d keys", MaxMappingKeys)
						}
					}
					break
				}
				col := tk.Position.Column
				if tk.Prev != nil && tk.Prev.Position.Line == tk.Position.Line {
					col = tk.Prev.Position.Column // the key's column
				}
				closeBlock(col, true)
				if n := len(stack); n > 0 && !stack[n-1].flow && !stack[n-1].seq && stack[n-1].col == col {
					stack[n-1].keys++
					if stack[n-1].keys > MaxMappingKeys {
						return nil, fail(tk, "a mapping has more than %d keys", MaxMappingKeys)
					}
					break
				}
				open(frame{col: col, keys: 1})
			}
			if len(stack) > MaxDepth {
				return nil, fail(tk, "nested more than %d levels deep", MaxDepth)
			}
		}
		if err != nil {
			break // the invalid token is the last of tokens: the parser reports it
		}
	}
	return tokens, nil
}

// treeCheck is stage 2 of readYAML: keys, and what aliases stand for.
type treeCheck struct {
	anchors  map[string]int  // the size of each anchor's value, aliases expanded
	defining map[string]bool // anchors whose value is being walked
	aliased  int             // nodes aliases stand for so far
	errs     Errors
}

func (c *treeCheck) fail(path, format string, args ...any) {
	if path == "" {
		path = "(root)"
	}
	if len(c.errs) < MaxErrors {
		c.errs = append(c.errs, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
}

// add is a + b, saturating above MaxAliasNodes.
func add(a, b int) int {
	if a+b > MaxAliasNodes {
		return MaxAliasNodes + 1
	}
	return a + b
}

// node walks n at path and returns its size: the number of nodes it would
// have with every alias replaced by what it names.
func (c *treeCheck) node(path string, n ast.Node) int {
	if c.aliased > MaxAliasNodes {
		return 0
	}
	switch n := n.(type) {
	case nil:
		return 0
	case *ast.DocumentNode:
		return c.node(path, n.Body)
	case *ast.MappingNode:
		size := 1
		for _, v := range n.Values {
			size = add(size, c.pair(path, v))
		}
		return size
	case *ast.MappingValueNode:
		return add(1, c.pair(path, n))
	case *ast.SequenceNode:
		size := 1
		for i, v := range n.Values {
			size = add(size, c.node(fmt.Sprintf("%s[%d]", path, i), v))
		}
		return size
	case *ast.AnchorNode:
		name := anchorName(n.Name)
		c.defining[name] = true
		size := add(1, c.node(path, n.Value))
		delete(c.defining, name)
		c.anchors[name] = size
		return size
	case *ast.AliasNode:
		name := anchorName(n.Value)
		if c.defining[name] {
			return 1 // an alias inside its own anchor: the decoder reads it as null
		}
		size := c.anchors[name] // 0 when unknown: the decoder reports it
		c.aliased = add(c.aliased, size)
		if c.aliased > MaxAliasNodes {
			c.fail(path, "aliases stand for more than %d values in all: too much expansion for a config", MaxAliasNodes)
		}
		return size
	case *ast.TagNode:
		return add(1, c.node(path, n.Value))
	case *ast.MappingKeyNode:
		return add(1, c.node(path, n.Value))
	}
	return 1
}

func anchorName(n ast.Node) string {
	if n == nil || n.GetToken() == nil {
		return ""
	}
	return n.GetToken().Value
}

// pair checks the key of one mapping entry and walks its value.
func (c *treeCheck) pair(path string, mv *ast.MappingValueNode) int {
	if mv == nil {
		return 0
	}
	var key ast.Node = mv.Key
	if k, ok := key.(*ast.MappingKeyNode); ok {
		key = k.Value
	}
	size := 1
	child := path
	switch k := key.(type) {
	case *ast.MergeKeyNode:
		// <<: *defaults — allowed; what it merges counts as aliased
	case *ast.StringNode:
		child = join(path, cut(k.Value, maxQuote))
	case *ast.AnchorNode:
		if s, ok := k.Value.(*ast.StringNode); ok {
			c.anchors[anchorName(k.Name)] = 1
			child = join(path, cut(s.Value, maxQuote))
			break
		}
		c.fail(path, "a mapping key must be a plain string, not %s", keyKind(k.Value))
	default:
		c.fail(path, "a mapping key must be a plain string, not %s", keyKind(key))
	}
	return add(size, c.node(child, mv.Value))
}

// keyKind names what a key that is not a string is.
func keyKind(n ast.Node) string {
	switch n := n.(type) {
	case nil:
		return "empty"
	case *ast.AliasNode:
		return fmt.Sprintf("an alias (*%s): aliases may not be keys", cut(anchorName(n.Value), maxQuote))
	case *ast.NullNode:
		return "null"
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return fmt.Sprintf("the number %s", cut(n.GetToken().Value, maxQuote))
	case *ast.BoolNode:
		return "a boolean"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.TagNode:
		return "a tagged value"
	case *ast.LiteralNode:
		return "a block scalar"
	case *ast.AnchorNode:
		return "an anchored " + strings.TrimPrefix(keyKind(n.Value), "a ")
	}
	return "a " + strings.ToLower(n.Type().String())
}
