#!/usr/bin/env node
// The installed `path-node` command (P15): runs the compiled CLI.
import '../dist/src/cli/main.js';
