/**
 * Where sessions are kept: a state directory (the JSONL file log, the default) or a Postgres
 * database (`--log postgres://…`). The flag beats `MUSE_LOG`, which beats the user config's
 * `log`, which beats the state directory (`MUSE_HOME`, the user's `stateDir`, the default). A
 * project file never chooses it: a repository must not send the logs of the sessions run in it
 * to a database of its choosing.
 *
 * @example
 * ```ts
 * const location = yield* LogStore.locate("postgres://muse@db/muse", loaded, process.env)
 * const store = yield* LogStore.open(location, process.env) // scoped: the database connections
 * ```
 */
import * as os from "node:os"
import * as path from "node:path"
import type { EventLog } from "@musekit/core"
import { EventLogFile } from "@musekit/node"
import { Effect, type Scope } from "effect"
import * as Config from "./config.js"
import { CliError, ExitCode } from "./exit.js"

export type Location =
  | { readonly kind: "dir"; readonly dir: string; readonly display: string; readonly source: string }
  | { readonly kind: "postgres"; readonly url: string; readonly display: string; readonly source: string }

// loaded only when a database is named: file users never load a database driver
const pgModule = () => Effect.promise(() => import("@musekit/pg"))

const fromValue = (value: string, source: string, base: string): Effect.Effect<Location, CliError> =>
  Effect.gen(function* () {
    if (/^postgres(ql)?:\/\//i.test(value)) {
      const { EventLogPg } = yield* pgModule()
      const display = EventLogPg.describeUrl(value)
      if (!URL.canParse(value)) {
        return yield* new CliError({
          code: ExitCode.Usage,
          message: `${source}: not a valid Postgres URL (${display}); write postgres://user[:password]@host[:port]/database`
        })
      }
      return { kind: "postgres", url: value, display, source } as const
    }
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
      return yield* new CliError({
        code: ExitCode.Usage,
        message: `${source}: ${JSON.stringify(value.split("://")[0])} logs are not supported; give a directory or a postgres:// URL`
      })
    }
    const dir = path.resolve(base, value.replace(/^~(?=$|\/)/, os.homedir()))
    return { kind: "dir", dir, display: dir, source } as const
  })

/** Where the sessions of this run are kept (see the module comment). */
export const locate = (
  flag: string | undefined,
  loaded: Config.Loaded,
  env: NodeJS.ProcessEnv,
  cwd: string = process.cwd()
): Effect.Effect<Location, CliError> => {
  if (flag !== undefined && flag !== "") return fromValue(flag, "--log", cwd)
  if (env.MUSE_LOG) return fromValue(env.MUSE_LOG, "MUSE_LOG", cwd)
  if (loaded.user?.log) return fromValue(loaded.user.log, loaded.userFile, path.dirname(loaded.userFile))
  const dir = Config.stateDir(loaded, env)
  return Effect.succeed({ kind: "dir", dir, display: dir, source: "the state directory" })
}

/** Open the store at `location` for as long as the scope lasts (secrets of `env` and the URL's password redacted). */
export const open = (
  location: Location,
  env: NodeJS.ProcessEnv
): Effect.Effect<EventLog.StoreService, CliError, Scope.Scope> =>
  Effect.gen(function* () {
    if (location.kind === "dir")
      return EventLogFile.makeStore({ dir: location.dir, redactor: EventLogFile.envRedactor(env) })
    const { EventLogPg } = yield* pgModule()
    return yield* EventLogPg.storeAt(location.url, { redactor: EventLogPg.redactorFor(location.url, env) }).pipe(
      Effect.mapError(
        (e) =>
          new CliError({
            code: ExitCode.Failed,
            message: `the session log at ${location.display} (${location.source}): ${e.message}`
          })
      )
    )
  })
