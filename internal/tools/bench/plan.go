package main

import "time"

// plan is the size of every figure.
type plan struct {
	quick bool
	// latencyEvents are sequential 1-job events (and as many bare runs).
	latencyEvents int
	// throughputEvents are 1-job events started at once (and as many bare runs).
	throughputEvents int
	// spreadPipelines share throughputEvents in the throughput_pipelines figure.
	spreadPipelines int
	// rounds each arm of a throughput comparison runs (sluice and its
	// baselines taking turns).
	rounds int
	// executorSlots is max-parallel per executor on the bench queue.
	executorSlots int
	// historyEvents are events per case of the history figure.
	historyEvents int
	// chainJobs is the length of the history figure's chain.
	chainJobs int
	// graphWidth × graphDepth jobs in the DAG; matrixSide² permutations.
	graphWidth, graphDepth int
	matrixSide             int
	// stormPushes webhook pushes within stormWindow seconds.
	stormPushes int
	stormWindow float64
	// scale: pipelines × jobs × matrix permutations builds, one event per
	// pipeline, queued before scaleExecutors executors start.
	scalePipelines, scaleJobs, scalePerms int
	scaleExecutors                        int
	// registryMembers heartbeat every 3 s for registryFor.
	registryMembers int
	registryFor     time.Duration
	// registryMode is "lease" (members check in as workers.RegistryLink
	// does) or "update" (a heartbeat update at every check-in).
	registryMode string
}

func planFor(quick bool, registryMembers int, registryFor time.Duration, registryMode string) plan {
	p := basePlan(quick)
	if registryMembers > 0 {
		p.registryMembers = registryMembers
	}
	if registryFor > 0 {
		p.registryFor = registryFor
	}
	p.registryMode = registryMode
	return p
}

func basePlan(quick bool) plan {
	if quick {
		return plan{
			quick:            true,
			latencyEvents:    15,
			throughputEvents: 60,
			spreadPipelines:  6,
			rounds:           2,
			executorSlots:    8,
			historyEvents:    2,
			chainJobs:        10,
			graphWidth:       5, graphDepth: 4,
			matrixSide:  3,
			stormPushes: 60, stormWindow: 1,
			scalePipelines: 2, scaleJobs: 5, scalePerms: 10,
			scaleExecutors:  4,
			registryMembers: 100, registryFor: 30 * time.Second,
		}
	}
	return plan{
		latencyEvents:    200,
		throughputEvents: 500,
		spreadPipelines:  50,
		rounds:           2,
		executorSlots:    8,
		historyEvents:    5,
		chainJobs:        10,
		graphWidth:       20, graphDepth: 10,
		matrixSide:  5,
		stormPushes: 300, stormWindow: 3,
		scalePipelines: 20, scaleJobs: 10, scalePerms: 25,
		scaleExecutors:  4,
		registryMembers: 500, registryFor: 5 * time.Minute,
	}
}

// scaleBuilds is how many builds the scale figure queues.
func (p plan) scaleBuilds() int { return p.scalePipelines * p.scaleJobs * p.scalePerms }
