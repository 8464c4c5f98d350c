module github.com/sluice-ci/sluice

go 1.26.8

require (
	github.com/caarlos0/env/v10 v10.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/temporalio/ui-server/v2 v2.55.0 // indirect
	go.temporal.io/api v1.63.5 // indirect
	go.temporal.io/sdk v1.50.0 // indirect
	go.temporal.io/server v1.32.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
