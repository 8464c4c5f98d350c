// Package warm pins dependencies while the packages that use them are written.
package warm

import (
	_ "github.com/caarlos0/env/v10"
	_ "github.com/google/uuid"
	_ "github.com/robfig/cron/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "go.yaml.in/yaml/v3"
)
