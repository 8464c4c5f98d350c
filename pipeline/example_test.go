package pipeline_test

import (
	"fmt"
	"time"

	"github.com/sluice-ci/sluice/pipeline"
)

func ExampleSpec_NextJobs() {
	spec, err := pipeline.Parse([]byte(`
shared:
  image: node:20
  steps: [{test: npm test}]
jobs:
  build: {requires: [~commit]}
  lint: {requires: [~commit]}
  deploy: {requires: [~hotfix, build, lint]}
  hotfix: {}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec.StartJobs(pipeline.EventCommit, "main", "main"))
	fmt.Println(spec.NextJobs("build"))
	fmt.Println(spec.NextJobs("hotfix"))
	fmt.Println(spec.JoinParents("deploy"))
	fmt.Println(spec.DetachedJobs())
	// Output:
	// [build lint]
	// [{deploy true}]
	// [{deploy false}]
	// [build lint]
	// [hotfix]
}

func ExampleExpandCron() {
	// Screwdriver seeds with the job id; sluice with PeriodicSeed(pipeline, job).
	expr, err := pipeline.ExpandCron("H H(0-5) * * 1-5", pipeline.PeriodicSeed("org/repo:main", "nightly"))
	fmt.Println(expr, err)
	// Output: 59 5 * * 1-5 <nil>
}

func ExampleFreezeWindows_NextOpen() {
	windows, err := pipeline.ParseFreezeWindows([]string{"* 0-6 ? * *", "* * ? * SAT,SUN"})
	if err != nil {
		fmt.Println(err)
		return
	}
	friday := time.Date(2026, 11, 27, 23, 30, 0, 0, time.UTC)
	open, err := windows.NextOpen(friday)
	fmt.Println(windows.Contains(friday), open.Format(time.RFC3339), err)
	saturday := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	open, err = windows.NextOpen(saturday)
	fmt.Println(windows.Contains(saturday), open.Format(time.RFC3339), err)
	// Output:
	// false 2026-11-27T23:30:00Z <nil>
	// true 2026-11-30T07:00:00Z <nil>
}
