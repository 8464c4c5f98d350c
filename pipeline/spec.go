package pipeline

import "time"

// Spec is a parsed, validated and flattened pipeline spec: shared merged into every job,
// stage setup/teardown jobs materialised, matrix expanded and the workflow graph built.
// It is plain data with exported fields and JSON tags so it can travel between Temporal
// workflows and activities; a JSON round trip keeps every query method working.
type Spec struct {
	// Version is the optional top-level "version" number (0 when absent).
	Version float64 `json:"version,omitempty"`
	// Annotations are the pipeline-level annotations (not merged into jobs).
	Annotations map[string]any `json:"annotations,omitempty"`
	// Parameters are the pipeline-level parameters, as written.
	Parameters map[string]any `json:"parameters,omitempty"`
	// Jobs maps a job name to the job, including stage setup/teardown jobs.
	Jobs map[string]*Job `json:"jobs"`
	// JobOrder lists job names in document order; stage setup/teardown jobs come last,
	// setup then teardown for each stage in stage order.
	JobOrder []string `json:"jobOrder"`
	// Stages maps a stage name to the stage.
	Stages map[string]*Stage `json:"stages,omitempty"`
	// StageOrder lists stage names in document order.
	StageOrder []string `json:"stageOrder,omitempty"`
	// Graph is the workflow graph, shaped like Screwdriver's workflowGraph.
	Graph Graph `json:"workflowGraph"`
	// ChildPipelines is the top-level "childPipelines" block, as written.
	ChildPipelines map[string]any `json:"childPipelines,omitempty"`
	// Subscribe is the top-level "subscribe" block, as written.
	Subscribe map[string]any `json:"subscribe,omitempty"`
	// Warnings are non-fatal findings: fields sluice does not act on (see
	// Fields and Annotations), a blockedBy naming a job that does not exist.
	Warnings []Warning `json:"warnings,omitempty"`
}

// Job is one job of the spec after shared, stage and template-free flattening.
type Job struct {
	// Name is the job name (stage setup/teardown jobs are "stage@<stage>:setup|teardown").
	Name string `json:"name"`
	// Description is the job description.
	Description string `json:"description,omitempty"`
	// Stage is the name of the stage the job belongs to, "" if none.
	Stage string `json:"stage,omitempty"`
	// Requires lists the job's requires as normalised strings (stage shorthands expanded,
	// e.g. "~stage@canary" becomes "~stage@canary:teardown"), in written order.
	Requires []string `json:"requires,omitempty"`
	// BlockedBy lists the jobs whose running builds block this job's builds.
	BlockedBy []string `json:"blockedBy,omitempty"`
	// FreezeWindows lists 5-field UTC cron expressions during which builds wait (FROZEN).
	FreezeWindows []string `json:"freezeWindows,omitempty"`
	// SourcePaths restricts commit/pr events to changes under these paths.
	SourcePaths []string `json:"sourcePaths,omitempty"`
	// Annotations are the job's annotations (shared merged in, job wins), values as written.
	Annotations map[string]any `json:"annotations,omitempty"`
	// Settings are the typed orchestrator settings derived from the annotations.
	Settings Settings `json:"settings"`
	// Notifications is Screwdriver's "settings" block (email, slack, ...), as written.
	Notifications map[string]any `json:"notifications,omitempty"`
	// Parameters are the job-level parameters, as written.
	Parameters map[string]any `json:"parameters,omitempty"`
	// Cache is the cache configuration flattened from the top-level "cache" block.
	Cache *JobCache `json:"cache,omitempty"`
	// Provider is the job's "provider" value (string or object), as written.
	Provider any `json:"provider,omitempty"`
	// Permutations holds one entry per matrix combination (exactly one without a matrix).
	Permutations []Permutation `json:"permutations"`
}

// Permutation is one buildable variant of a job: one combination of its matrix.
type Permutation struct {
	// Image is the container image with {{VAR}} placeholders substituted.
	Image string `json:"image"`
	// Commands are the steps in execution order (teardown-* steps last).
	Commands []Command `json:"commands"`
	// Environment is the job environment plus this permutation's matrix values, all strings.
	Environment map[string]string `json:"environment"`
	// Matrix holds just this permutation's matrix values (nil without a matrix).
	Matrix map[string]string `json:"matrix,omitempty"`
	// Secrets lists secret names exposed to the build.
	Secrets []string `json:"secrets,omitempty"`
}

// Command is one step of a job.
type Command struct {
	// Name is the step name (step-N for a bare string step).
	Name string `json:"name"`
	// Command is the shell command.
	Command string `json:"command"`
}

// JobCache is the cache configuration of one job.
type JobCache struct {
	// Pipeline lists paths cached per pipeline.
	Pipeline []string `json:"pipeline"`
	// Event lists paths cached per event.
	Event []string `json:"event"`
	// Job lists paths cached for this job.
	Job []string `json:"job"`
}

// Stage is a named group of jobs with a setup and a teardown job.
type Stage struct {
	// Name is the stage name.
	Name string `json:"name"`
	// Description is the stage description.
	Description string `json:"description,omitempty"`
	// Jobs lists the member jobs in the order the stage lists them.
	Jobs []string `json:"jobs"`
	// Requires lists the stage's requires, normalised like Job.Requires (they are the
	// setup job's requires).
	Requires []string `json:"requires,omitempty"`
	// SourcePaths are the stage's sourcePaths (applied to its setup job).
	SourcePaths []string `json:"sourcePaths,omitempty"`
	// Setup is the name of the stage's setup job: "stage@<name>:setup".
	Setup string `json:"setup"`
	// Teardown is the name of the stage's teardown job: "stage@<name>:teardown".
	Teardown string `json:"teardown"`
}

// Settings are the typed per-job settings the orchestrator needs, derived from
// annotations (see the Annotation* constants) with defaults applied.
type Settings struct {
	// CollapseBuilds lets a newer waiting build replace an older waiting one (default true).
	CollapseBuilds bool `json:"collapseBuilds"`
	// BuildPeriodically is the annotation's cron as written ("" if unset).
	BuildPeriodically string `json:"buildPeriodically,omitempty"`
	// PeriodicCron is BuildPeriodically with H expanded (see ExpandCron and PeriodicSeed).
	PeriodicCron string `json:"periodicCron,omitempty"`
	// Timeout is the build timeout (default 90 minutes).
	Timeout time.Duration `json:"timeout"`
	// BlockedBySameJob makes a build wait while another build of the job runs (default true).
	BlockedBySameJob bool `json:"blockedBySameJob"`
	// BlockedBySameJobWaitTime is how long to wait before re-checking (0 = engine default).
	BlockedBySameJobWaitTime time.Duration `json:"blockedBySameJobWaitTime,omitempty"`
	// ManualStartEnabled allows starting the job by hand (default true).
	ManualStartEnabled bool `json:"manualStartEnabled"`
	// VirtualJob marks a job that runs no steps: it succeeds as soon as it starts.
	VirtualJob bool `json:"virtualJob,omitempty"`
	// Executor names the queue the job's builds go to ("" = pipeline/default queue).
	Executor string `json:"executor,omitempty"`
	// Delay is how long a build stays queued before it may start.
	Delay time.Duration `json:"delay,omitempty"`
	// RetryOnLoss (sluice.dev/retryOnLoss, default true): a build whose
	// executor was lost runs again on another dispatch; false ends it
	// FAILURE at the first loss (for steps that must not run twice).
	RetryOnLoss bool `json:"retry_on_loss"`
	// Priority is the build priority, 1 (highest) to 5 (lowest); default 3.
	Priority int `json:"priority"`
}

// Graph is the workflow graph in Screwdriver's workflowGraph shape.
type Graph struct {
	// Nodes are the graph's nodes: "~pr", "~commit", every job and every trigger named
	// in a requires.
	Nodes []Node `json:"nodes"`
	// Edges are the graph's edges, one per (require, job).
	Edges []Edge `json:"edges"`
}

// Node is one workflow graph node.
type Node struct {
	// Name is the job name or trigger ("~commit", "~tag:/^v/", "sd@p:j", "~sd@p:j", ...).
	Name string `json:"name"`
	// StageName is the stage the job belongs to, "" if none.
	StageName string `json:"stageName,omitempty"`
	// Virtual is true for virtual jobs (screwdriver.cd/virtualJob: true).
	Virtual bool `json:"virtual,omitempty"`
}

// Edge is one workflow graph edge: Dest requires Src. Join is true when the require was
// written without a tilde (an AND edge: Dest waits for all its join parents in the same
// event); it is omitted from JSON when false (an OR edge: Src alone starts Dest).
type Edge struct {
	// Src is the upstream node.
	Src string `json:"src"`
	// Dest is the downstream job.
	Dest string `json:"dest"`
	// Join marks an AND edge.
	Join bool `json:"join,omitempty"`
}
