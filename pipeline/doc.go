// Package pipeline parses and validates sluice pipeline specs: screwdriver.yaml files,
// read the way Screwdriver's config-parser and workflow-parser read them, with a few
// stricter rules.
//
// Parse turns YAML (one document, or the "version: 4" document of several) into a Spec:
// shared merged into every job, stage setup/teardown jobs made explicit
// ("stage@<name>:setup|teardown", virtual no-op jobs when the stage does not define
// them), steps normalised to Commands, one Permutation per matrix combination, typed
// Settings derived from annotations, and the workflow Graph in Screwdriver's
// workflowGraph shape ({src, dest, join}, join only on edges from requires written
// without a tilde). Every problem is reported at once in a *ValidationError whose
// messages use Screwdriver's wording where Screwdriver has one and otherwise name the job
// and field; warnings (e.g. a blockedBy naming a missing job) go to Spec.Warnings.
//
// Beyond Screwdriver, these are errors: a requires naming a job or stage that does not
// exist (the join could never fire), an invalid cron in freezeWindows or
// buildPeriodically, and an annotation the orchestrator reads holding a value of the
// wrong type. Templates (job and pipeline) are not supported.
//
// The execution engine asks the Spec questions rather than walking the graph itself:
// StartJobs (which jobs an SCM event starts), NextJobs and JoinParents (what to start
// after a job succeeds, OR versus AND), SubscribedJobs and RemoteTriggers (remote
// ~sd@pipeline:job triggers), StageJobs, FilterBySourcePaths, DetachedJobs and
// PeriodicJobs. ExpandCron expands buildPeriodically's H with Screwdriver's hash, and
// FreezeWindows computes when a frozen build may start. Render draws the graph as JSON,
// Graphviz dot or Mermaid.
//
// The package is pure: no Temporal, no network, no clock. A Spec is plain data with JSON
// tags, so it can be passed between workflows and activities.
package pipeline
