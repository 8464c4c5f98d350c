package main

import "github.com/spf13/cobra"

// addClientCommands adds the commands that talk to the API.
func (a *app) addClientCommands(root *cobra.Command) {
	pipelineCmd := &cobra.Command{Use: "pipeline", Short: "Validate, graph and manage pipelines"}
	pipelineCmd.AddCommand(newPipelineValidateCmd(), newPipelineGraphCmd())
	root.AddCommand(pipelineCmd)
}
