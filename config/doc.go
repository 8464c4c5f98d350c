// Package config loads sluice's one typed configuration from the environment
// with caarlos0/env, validates it, and reports every problem at once with the
// name of the variable at fault. Command-line flags override the environment;
// the starter binds them to the same fields.
package config
