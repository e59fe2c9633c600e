package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// imports are the packages a fragment may name without importing them:
// package name -> import path.
var imports = map[string]string{
	"cmp":     "cmp",
	"context": "context",
	"errors":  "errors",
	"fmt":     "fmt",
	"http":    "net/http",
	"log":     "log",
	"os":      "os",
	"slog":    "log/slog",
	"strings": "strings",
	"sync":    "sync",
	"time":    "time",

	"dlock":      "github.com/dlock-go/dlock",
	"dlockotel":  "github.com/dlock-go/dlock/dlockotel",
	"election":   "github.com/dlock-go/dlock/election",
	"etcdlock":   "github.com/dlock-go/dlock/etcdlock",
	"gocronlock": "github.com/dlock-go/dlock/gocronlock",
	"httplock":   "github.com/dlock-go/dlock/httplock",
	"redislock":  "github.com/dlock-go/dlock/redislock",
	"redlock":    "github.com/dlock-go/dlock/redlock",

	"clientv3": "go.etcd.io/etcd/client/v3",
	"gocron":   "github.com/go-co-op/gocron/v2",
	"redis":    "github.com/redis/go-redis/v9",
}

// signature is the function a fragment is the body of.
const signature = "func _(ctx context.Context, rdb *redis.Client, locker *redislock.Locker) error"

// A block is one ```go block of a Markdown file.
type block struct {
	file string // the Markdown file's path
	line int    // the line of the block's first line of code
	code string
}

// blocks returns the ```go blocks of the Markdown file at path. An
// indented ```go fence, or one left open, is an error, so that no block
// goes unchecked unnoticed.
func blocks(path string) ([]block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var (
		out  []block
		cur  *block
		code strings.Builder
		n    int
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go" && line != "```go":
			return nil, fmt.Errorf("%s:%d: an indented ```go fence: start it at the line's beginning", path, n)
		case cur == nil && line == "```go":
			cur = &block{file: path, line: n + 1}
			code.Reset()
		case cur != nil && line == "```":
			cur.code = code.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			code.WriteString(line)
			code.WriteByte('\n')
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a ```go block is never closed", path, cur.line-1)
	}
	return out, sc.Err()
}

// isFile says whether b is a whole file: it starts, after any comments,
// with a package clause.
func (b block) isFile() bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", b.code, parser.PackageClauseOnly)
	return err == nil
}

// lineDirective makes the compiler report b's positions in its Markdown
// file.
func (b block) lineDirective() string {
	return fmt.Sprintf("//line %s:%d\n", b.file, b.line)
}

// wrap returns a fragment as a Go file of package pkg: the body of a
// function with signature, with the imports of the packages it names.
func wrap(b block, pkg string) (string, error) {
	body := b.code
	// Parse once without imports to find the names the fragment uses
	// but does not declare, and whether it ends in a return.
	probe := "package p\n\n" + signature + " {\n{\n" + body + "}\n}\n"
	f, err := parser.ParseFile(token.NewFileSet(), b.file, probe, 0)
	if err != nil {
		return "", fmt.Errorf("%s:%d: not a function body: %v", b.file, b.line, err)
	}
	var names []string
	for _, id := range f.Unresolved {
		if _, ok := imports[id.Name]; ok && !slices.Contains(names, id.Name) {
			names = append(names, id.Name)
		}
	}
	slices.Sort(names)
	fn := f.Decls[0].(*ast.FuncDecl)
	inner := fn.Body.List[0].(*ast.BlockStmt)
	returns := len(inner.List) > 0
	if returns {
		_, returns = inner.List[len(inner.List)-1].(*ast.ReturnStmt)
	}

	var src strings.Builder
	fmt.Fprintf(&src, "package %s\n\nimport (\n", pkg)
	for _, name := range names {
		fmt.Fprintf(&src, "\t%s %q\n", name, imports[name])
	}
	fmt.Fprintf(&src, ")\n\n%s {\n{\n%s%s}\n", signature, b.lineDirective(), body)
	if !returns {
		src.WriteString("return nil\n")
	}
	src.WriteString("}\n")
	return src.String(), nil
}

// check writes the ```go blocks of the Markdown files into packages under
// a temporary directory of dir, which must lie in a module that can import
// every package of the imports table, and builds and vets them with the
// go command. It returns the number of blocks checked, and an error that
// quotes the go command's output, which places each problem at its
// Markdown file and line. The directory's name starts with "_", so that
// the go command's ./... patterns never match it.
func check(dir string, files []string) (int, error) {
	tmp, err := os.MkdirTemp(dir, "_snippets-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)

	var pkgs []string
	count := 0
	for i, file := range files {
		bs, err := blocks(file)
		if err != nil {
			return count, err
		}
		fragments := filepath.Join(tmp, fmt.Sprintf("f%d", i))
		hasFragment := false
		for j, b := range bs {
			count++
			if b.isFile() {
				pkg := filepath.Join(tmp, fmt.Sprintf("f%db%d", i, j))
				if err := write(filepath.Join(pkg, "main.go"), b.lineDirective()+b.code); err != nil {
					return count, err
				}
				pkgs = append(pkgs, pkg)
				continue
			}
			src, err := wrap(b, fmt.Sprintf("f%d", i))
			if err != nil {
				return count, err
			}
			if err := write(filepath.Join(fragments, fmt.Sprintf("b%d.go", j)), src); err != nil {
				return count, err
			}
			hasFragment = true
		}
		if hasFragment {
			pkgs = append(pkgs, fragments)
		}
	}
	if len(pkgs) == 0 {
		return count, nil
	}
	for _, verb := range []string{"build", "vet"} {
		args := []string{verb}
		for _, p := range pkgs {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return count, err
			}
			args = append(args, "./"+filepath.ToSlash(rel))
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return count, fmt.Errorf("go %s: %w\n%s", verb, err, out)
		}
	}
	return count, nil
}

// write writes a file, and the directories it needs.
func write(path, src string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(src), 0o644)
}

// guides returns README.md and the guides of this directory.
func guides(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join("..", "README.md")}, files...)
}

// Every ```go block of README.md and docs/*.md compiles and passes go vet.
func TestSnippets(t *testing.T) {
	files := guides(t)
	n, err := check(".", files)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no ```go blocks in %v", files)
	}
	t.Logf("%d blocks in %d files", n, len(files))
}

// The check fails on a block that does not compile, at its Markdown line,
// and on a block that go vet refuses.
func TestSnippetsCatchBrokenCode(t *testing.T) {
	for _, tc := range []struct {
		name, md, want string
	}{
		{"fragment", "# A\n\n```go\nlk, err := locker.TryLock(ctx, \"k\")\nif err != nil {\n\treturn err\n}\nlk.Unlok(ctx)\n```\n", "broken.md:8:"},
		{"unused", "```go\nlk, err := locker.TryLock(ctx, \"k\")\n_ = err\n```\n", "broken.md:2:"},
		{"vet", "```go\nfmt.Printf(\"%d\\n\", \"x\")\n```\n", "broken.md:2:"},
		{"file", "text\n\n```go\npackage main\n\nfunc main() { undefined() }\n```\n", "broken.md:6:"},
		{"unclosed", "```go\nreturn nil\n", "never closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := filepath.Join(t.TempDir(), "broken.md")
			if err := os.WriteFile(md, []byte(tc.md), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := check(".", []string{md})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("check: %v; want an error at %q", err, tc.want)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}
}
