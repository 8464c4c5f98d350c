package cliout

import (
	"io"
	"strings"
	"text/tabwriter"
)

// Table writes rows as aligned columns separated by two spaces, the header
// first. Cells are folded to one line; callers put Dash in cells that have
// no value and "" in continuation rows.
type Table struct {
	tw   *tabwriter.Writer
	rows int
}

// NewTable returns a table writing to w with the given column headers.
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.write(header)
	return t
}

// Row adds one row.
func (t *Table) Row(cells ...string) {
	t.rows++
	t.write(cells)
}

// Rows counts the rows added (the header not included).
func (t *Table) Rows() int { return t.rows }

func (t *Table) write(cells []string) {
	clean := make([]string, len(cells))
	for i, c := range cells {
		if strings.ContainsAny(c, "\t\n\r") {
			c = OneLine(c)
		}
		clean[i] = c
	}
	// tabwriter pads a cell only when a tab follows it: the last column is
	// never padded, so lines carry no trailing spaces.
	_, _ = io.WriteString(t.tw, strings.Join(clean, "\t")+"\n")
}

// Flush writes the aligned table.
func (t *Table) Flush() error { return t.tw.Flush() }

// Fields writes "key: value" lines with the values aligned, skipping empty
// values: the body of `show` commands.
type Fields struct {
	rows [][2]string
}

// Add adds a field; an empty value is left out.
func (f *Fields) Add(key, value string) {
	if value == "" {
		return
	}
	f.rows = append(f.rows, [2]string{key, value})
}

// Write writes the fields to w.
func (f *Fields) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, r := range f.rows {
		_, _ = io.WriteString(tw, r[0]+":\t"+OneLine(r[1])+"\n")
	}
	return tw.Flush()
}
