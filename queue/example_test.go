package queue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-ci/sluice/queue"
)

func ExampleParseRule() {
	rule, err := queue.ParseRule("run-on=executors,max-parallel=4,labels=pool=gpu")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rule.String())

	_, err = queue.ParseRule("run-on=workers,max-parallel=0")
	fmt.Println(err)
	// Output:
	// run-on=executors,max-parallel=4,min-gap=0s,labels=pool=gpu
	// parse rule "run-on=workers,max-parallel=0": run-on="workers" must be one of controller, executors, any; max-parallel must be ≥ 1 (got 0)
}

func ExampleEvaluate() {
	now := time.Date(2026, time.March, 4, 12, 0, 0, 0, time.UTC)
	q := queue.Queue{
		Name: "reports",
		Rules: []queue.Rule{
			{RunOn: queue.RunOnExecutors, MaxParallel: 4},
			{RunOn: queue.RunOnController, MaxParallel: 1, MinGap: 5 * time.Second},
		},
	}
	members := []queue.Member{
		{Name: "ctl", Role: queue.RoleController, State: queue.StateActive, LastSeen: now},
		{Name: "exec-a", Role: queue.RoleExecutor, Queues: []string{"*"}, State: queue.StateActive, LastSeen: now.Add(-42 * time.Second)},
	}

	plan := queue.Evaluate(q, members, now, 30*time.Second)
	fmt.Println(plan.Why)
	fmt.Println(plan.Slots, plan.Allowed["ctl"], plan.Allowed["exec-a"])
	fmt.Println(queue.WaitReason(q, plan, 1, 3))
	// Output:
	// rule 1 has no live member (exec-a last seen 42s ago), falling back to rule 2 (controller, max-parallel=1, min-gap=5s): 1 live member ctl
	// 1 1 0
	// waiting for a slot on queue reports: 1/1 busy, 3 ahead (on fallback rule 2: controller, max-parallel=1, min-gap=5s)
}

func ExampleSlotPool() {
	pool := queue.NewSlotPool(queue.RealClock{})
	// An executor sets the limit from its entry in the plan and the active
	// rule's gap, and again whenever the plan changes.
	pool.SetLimit(2, 0)

	slot, err := pool.Reserve(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("running on slot", slot.Index(), "used", pool.Used(), "of", pool.Limit())
	slot.Release()
	fmt.Println("used", pool.Used())
	// Output:
	// running on slot 0 used 1 of 2
	// used 0
}
