package workers

import (
	"cmp"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluice-ci/sluice/activities"
)

// fakeRegistry records what is registered on it, by name.
type fakeRegistry struct {
	worker.Registry // nil: a method not overridden here panics

	workflows  []string
	activities []string
}

func funcName(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	name = strings.TrimSuffix(name, "-fm") // a method value
	return name[strings.LastIndex(name, ".")+1:]
}

func (r *fakeRegistry) RegisterWorkflow(w any) { r.workflows = append(r.workflows, funcName(w)) }

func (r *fakeRegistry) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	r.workflows = append(r.workflows, cmp.Or(o.Name, funcName(w)))
}

func (r *fakeRegistry) RegisterActivity(a any) { r.activities = append(r.activities, funcName(a)) }

func (r *fakeRegistry) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	r.activities = append(r.activities, cmp.Or(o.Name, funcName(a)))
}

// localActivities lists the activities the workflows package calls as
// local activities (workflow.ExecuteLocalActivity(ctx, a.Name, ...)): a
// local activity runs on the workflow's worker, which must have it
// registered — called through the workflows' nil receiver otherwise, it
// crashes the worker.
func localActivities(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "workflows", "*.go"))
	require.NoError(t, err)
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			fn, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || fn.Sel.Name != "ExecuteLocalActivity" {
				return true
			}
			act, ok := call.Args[1].(*ast.SelectorExpr)
			require.True(t, ok, "%s: a local activity not named as a.Method", fset.Position(call.Pos()))
			if !slices.Contains(names, act.Sel.Name) {
				names = append(names, act.Sel.Name)
			}
			return true
		})
	}
	slices.Sort(names)
	return names
}

// TestRegisterControllerRegistersLocalActivities: the controller's worker,
// which runs the workflows, registers every activity they call as a local
// activity (UpdatePipeline was once missing: events crashed their worker).
func TestRegisterControllerRegistersLocalActivities(t *testing.T) {
	t.Parallel()
	var r fakeRegistry
	RegisterController(&r, &activities.Activities{})

	local := localActivities(t)
	// The scan finds what it must (a scan that finds nothing proves nothing).
	require.Subset(t, local, []string{"ResolveEvent", "TriggerRemote", "UpdatePipeline"})
	for _, name := range local {
		require.Contains(t, r.activities, name, "local activity %s is not registered on the controller", name)
	}
	require.Contains(t, r.workflows, "EventWorkflow")
	require.Contains(t, r.workflows, "PipelineWorkflow")
	// Each is registered once (a second registration panics on a real worker).
	seen := map[string]bool{}
	for _, name := range r.activities {
		require.False(t, seen[name], "activity %s registered twice", name)
		seen[name] = true
	}
}
