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
// Decisions where Screwdriver is silent or sluice differs:
//
//   - Configs for which Screwdriver's parser returns an error pipeline (bad slack/email
//     notification settings, cache set for a missing job, "cache: false" without a
//     top-level cache) are rejected by Parse with Screwdriver's messages.
//   - "~pr-closed" and "~subscribe" keep their tilde as graph nodes, like "~pr".
//   - Remote triggers accept any pipeline identity without whitespace, "~" or "@"; the
//     job is what follows the last ":" ("sd@123:job", "sd@org/repo:main:job").
//   - buildPeriodically is seeded with PeriodicSeed(Options.Pipeline, job), not a job id.
//   - Freeze windows must have "?" in day-of-month or day-of-week; day-of-week is 0-6
//     (or SUN-SAT); they are evaluated in UTC, minute by minute.
//   - Stage member jobs may only be triggered by their stage's jobs or setup job, and may
//     not have sourcePaths (Screwdriver's rules); the setup job carries the stage's.
//
// The package is pure: no Temporal, no network, no clock. A Spec is plain data with JSON
// tags, so it can be passed between workflows and activities.
package pipeline
