/**
 * @musekit/cli — `muse`, the reference terminal coding agent built from MuseKit.
 *
 * The package is mostly its executable (`muse`); this entry exposes what other tools may reuse:
 * the command-line `main`, the config file schema, the exit codes and the scripted test model.
 *
 * @example
 * ```ts
 * import { main } from "@musekit/cli"
 *
 * const code = await main({ argv: ["sessions"], env: process.env, cwd: process.cwd(),
 *   stdin: process.stdin, stdout: process.stdout, stderr: process.stderr })
 * ```
 */
export { ConfigFile, projectConfigFile, userConfigFile } from "./internal/config.js"
export { CliError, ExitCode } from "./internal/exit.js"
export { main, type ProcessIo } from "./internal/main.js"
export { Script as ScriptFile } from "./internal/scripted.js"
