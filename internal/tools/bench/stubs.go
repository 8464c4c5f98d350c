package main

import (
	"context"
	"errors"
)

func runHistory(context.Context, *bench) (string, error) { return "", errors.New("todo") }
func runGraph(context.Context, *bench) (string, error)   { return "", errors.New("todo") }
func runStorm(context.Context, *bench) (string, error)   { return "", errors.New("todo") }
func runScale(context.Context, *bench) (string, error)   { return "", errors.New("todo") }
