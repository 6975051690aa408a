package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// architecture is the page every section reference points at.
var architecture = filepath.Join(root, "docs", "architecture.md")

var (
	// sectionRef is a section reference: the section sign, then a number,
	// optionally with a subsection number after a dot (7, 3.2). The sign is
	// written as an escape so that this file holds no reference of its own.
	sectionRef = regexp.MustCompile(`\x{00A7}\s?(\d+)(?:\.(\d+))?`)
	// oldDesign is the design document that lived outside the repository.
	oldDesign = regexp.MustCompile(`\bDESIGN\b`)
	// heading is a Markdown heading of architecture.md.
	heading = regexp.MustCompile(`(?m)^(#{2,3}) (.+?)\s*$`)
	// numbered is the number a section heading starts with ("7." or "3.2").
	numbered = regexp.MustCompile(`^(\d+(?:\.\d+)?)\.?\s`)
	// mdLink is a Markdown link target.
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// scanned says whether a file's references are checked.
func scanned(path string) bool {
	switch filepath.Ext(path) {
	case ".go", ".md", ".sql", ".yaml", ".yml":
		return true
	}
	return false
}

// skipDir leaves out what is not the project's own text: hidden
// directories (.git, caches), installed npm packages and fuzz corpora.
func skipDir(path string, d fs.DirEntry) bool {
	name := d.Name()
	if path != root && strings.HasPrefix(name, ".") {
		return true
	}
	return name == "node_modules" || (name == "fuzz" && filepath.Base(filepath.Dir(path)) == "testdata")
}

// sections reads architecture.md: its section numbers ("7", "3.2") and
// the anchors GitHub gives its headings.
func sections(t *testing.T) (numbers, anchors map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(architecture)
	if err != nil {
		t.Fatalf("the architecture page: %v", err)
	}
	numbers, anchors = map[string]bool{}, map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(string(b), -1) {
		anchors[anchor(m[2])] = true
		n := numbered.FindStringSubmatch(m[2])
		if n == nil {
			continue
		}
		// "## 7. …" numbers a section, "### 3.2 …" a subsection.
		if (len(m[1]) == 2) != !strings.Contains(n[1], ".") {
			t.Errorf("architecture.md: heading %q: a ## heading is numbered N., a ### heading N.M", m[0])
			continue
		}
		numbers[n[1]] = true
	}
	if len(numbers) == 0 {
		t.Fatal("architecture.md has no numbered section")
	}
	return numbers, anchors
}

// anchor is the fragment GitHub links a heading with: lower case, spaces
// as hyphens, punctuation other than hyphens and underscores dropped.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// lineOf is the 1-based line of offset i in s.
func lineOf(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

// TestArchitectureReferencesResolve fails when a comment or page cites a
// section that architecture.md does not have, links to a heading it does
// not have, or still points at the design document that was never in the
// repository.
func TestArchitectureReferencesResolve(t *testing.T) {
	numbers, anchors := sections(t)
	archAbs, err := filepath.Abs(architecture)
	if err != nil {
		t.Fatal(err)
	}
	refs := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(path, d) {
				return filepath.SkipDir
			}
			return nil
		}
		if !scanned(path) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text, rel := string(b), strings.TrimPrefix(filepath.ToSlash(path), "../")
		for _, m := range sectionRef.FindAllStringSubmatchIndex(text, -1) {
			refs++
			n := text[m[2]:m[3]]
			if m[4] >= 0 {
				n += "." + text[m[4]:m[5]]
			}
			if !numbers[n] {
				t.Errorf("%s:%d: %q names no section of docs/architecture.md", rel, lineOf(text, m[0]), text[m[0]:m[1]])
			}
		}
		for _, m := range oldDesign.FindAllStringIndex(text, -1) {
			t.Errorf("%s:%d: refers to the team's old design document; cite a section of docs/architecture.md instead", rel, lineOf(text, m[0]))
		}
		if filepath.Ext(path) != ".md" {
			return nil
		}
		pathAbs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		for _, m := range mdLink.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[2]:m[3]]
			file, frag, _ := strings.Cut(target, "#")
			if strings.Contains(file, "://") {
				continue
			}
			dest := pathAbs
			if file != "" {
				dest = filepath.Join(filepath.Dir(pathAbs), filepath.FromSlash(file))
			}
			if dest != archAbs {
				continue
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s:%d: link %q: %v", rel, lineOf(text, m[0]), target, err)
			}
			if frag != "" && !anchors[frag] {
				t.Errorf("%s:%d: link %q names no heading of docs/architecture.md", rel, lineOf(text, m[0]), target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if refs == 0 {
		t.Error("no section reference found anywhere: the walk missed the repository")
	}
}

// TestArchitectureSectionsKeepTheirNumbers pins the numbered sections
// that code and outside readers cite: renumbering one would silently move
// every reference to it.
func TestArchitectureSectionsKeepTheirNumbers(t *testing.T) {
	b, err := os.ReadFile(architecture)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"## 1. Guarantees (Contract)",
		"## 2. Vocabulary",
		"## 3. The actor tree",
		"## 4. Placement and membership",
		"## 5. Brokers",
		"## 6. Persistence",
		"## 7. What a message becomes (Contract)",
		"## 8. Quality windows",
		"## 9. Node, configuration and CLI (Contract)",
		"## 10. Debug endpoint (Contract)",
		"## 11. Testkit and simulator",
		"## 12. Where it runs",
		"## 13. Unit life cycle",
		"## 14. Leases and fencing",
		"## 15. Package layout and goroutines",
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, h := range want {
		if !lines[h] {
			t.Errorf("architecture.md lacks the heading %q", h)
		}
	}
}

func TestAnchor(t *testing.T) {
	for title, want := range map[string]string{
		"9. Node, configuration and CLI (Contract)": "9-node-configuration-and-cli-contract",
		"13. Unit life cycle":                       "13-unit-life-cycle",
		"7. What a message becomes (Contract)":      "7-what-a-message-becomes-contract",
	} {
		if got := anchor(title); got != want {
			t.Errorf("anchor(%q) = %q, want %q", title, got, want)
		}
	}
}
