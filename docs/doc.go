// Package docs holds drover's documentation pages: architecture.md (how
// drover is built; code comments cite its sections as "architecture §N")
// and security.md. It has no code. Its test checks that every section
// reference in the repository's Go, SQL, YAML and Markdown files names a
// numbered section of architecture.md, that every link into
// architecture.md names one of its headings, and that nothing points at
// the team's old, unpublished design document any more.
package docs
