/**
 * Running `git` without letting a repository run programs through it.
 *
 * A repository's own configuration (`.git/config`, a worktree's `config.worktree`, files they
 * include) and its `.gitattributes` can make git start programs: `core.fsmonitor`, hooks,
 * `core.sshCommand`, `core.pager`, `core.editor`, clean/smudge/process filters, merge drivers,
 * diff drivers and `textconv`, credential helpers, transports such as `ext::`. Every git process
 * muse starts is prepared here:
 *
 * - **fixed overrides** ({@link fixedConfig}): no fsmonitor, hooks from `/dev/null`, no ssh, pager,
 *   editor, askpass or credential helper, no transport at all, no signing, no automatic gc (a
 *   command that talks to a remote, run outside any repository with `remote: true`, may use
 *   file, http(s) and ssh, with the user's own ssh command, credential helpers and CA settings,
 *   from the system and global config and the caller's `GIT_SSH*`/`GIT_SSL_*`/`GIT_HTTP_*`);
 * - **the repository's drivers**: before a command that reads or writes file contents, the
 *   configuration is listed (`git config --list --show-scope`) and every filter, merge driver,
 *   diff command and textconv set in the repository's own scope (local or worktree, includes
 *   followed) is overridden ({@link repoOverrides}): filters do nothing, merge drivers run git's
 *   own three-way merge, textconv is `cat`. Those defined in the user's global config (Git LFS,
 *   say) are kept: the user's own settings are trusted, the repository's are not;
 * - **the environment** ({@link environment}): no system config or attributes, no prompts, and
 *   none of the `GIT_*` variables that redirect git or name programs for it (a surrounding git
 *   process, such as a hook, sets some of them).
 *
 * All overrides travel as `GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_<n>` / `GIT_CONFIG_VALUE_<n>`
 * (command-line scope, so they win over every file, and any key name works), which needs git 2.31
 * or newer ({@link versionProblem}). `safe.directory` is left alone: a repository owned by
 * someone else is refused by git itself, with git's own message.
 *
 * @example
 * ```ts
 * import { Git } from "@musekit/node"
 *
 * const r = Git.runSync(["rev-parse", "--show-toplevel"], { cwd: process.cwd() })
 * if (r.status === 0) console.log(r.stdout.trim())
 * ```
 */
import { type SpawnSyncReturns, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** Config every muse git call runs with, whatever any config file says. */
export const fixedConfig: ReadonlyArray<readonly [key: string, value: string]> = [
  ["core.fsmonitor", "false"],
  ["core.hooksPath", "/dev/null"],
  ["core.sshCommand", "false"],
  ["core.askPass", ""],
  ["core.pager", "cat"],
  ["core.editor", ":"],
  ["sequence.editor", ":"],
  ["credential.helper", ""],
  ["protocol.allow", "never"],
  ["diff.external", "false"],
  ["commit.gpgSign", "false"],
  ["tag.gpgSign", "false"],
  ["merge.verifySignatures", "false"],
  ["log.showSignature", "false"],
  ["submodule.recurse", "false"],
  ["gc.auto", "0"],
  ["maintenance.auto", "false"]
]

/** What a merge driver the repository names runs instead: git's own three-way text merge. */
export const BUILTIN_MERGE = "git merge-file --diff3 --marker-size=%L %A %O %B"

/** Variables of the caller's environment git may still see (identity, where the user's config is). */
const KEEP = new Set([
  "GIT_CONFIG_GLOBAL",
  "GIT_AUTHOR_NAME",
  "GIT_AUTHOR_EMAIL",
  "GIT_AUTHOR_DATE",
  "GIT_COMMITTER_NAME",
  "GIT_COMMITTER_EMAIL",
  "GIT_COMMITTER_DATE",
  "GIT_CEILING_DIRECTORIES",
  "GIT_DISCOVERY_ACROSS_FILESYSTEM"
])

/**
 * The environment of a git child process: the caller's, without the `GIT_*` variables that
 * redirect git (`GIT_DIR`, `GIT_INDEX_FILE`, `GIT_EXEC_PATH`, `GIT_CONFIG_PARAMETERS`, …) or name
 * programs (`GIT_SSH_COMMAND`, `GIT_EXTERNAL_DIFF`, `SSH_ASKPASS`, …), with no system config or
 * attributes, no prompts, no pager, no editor, no transport, and `overrides` (after
 * {@link fixedConfig}) as command-line config. `extra` is set last.
 */
export const environment = (
  overrides: ReadonlyArray<readonly [string, string]> = [],
  extra: Record<string, string> = {},
  base: NodeJS.ProcessEnv = process.env,
  fixed: ReadonlyArray<readonly [string, string]> = fixedConfig
): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(base)) {
    if (v === undefined) continue
    if (k.startsWith("GIT_") && !KEEP.has(k)) continue
    if (k === "SSH_ASKPASS" || k === "PAGER" || k === "EDITOR" || k === "VISUAL") continue
    env[k] = v
  }
  env.LC_ALL = "C"
  env.LANGUAGE = "C"
  env.GIT_CONFIG_NOSYSTEM = "1"
  env.GIT_ATTR_NOSYSTEM = "1"
  env.GIT_TERMINAL_PROMPT = "0"
  env.GIT_ASKPASS = ""
  env.GIT_EDITOR = ":"
  env.GIT_SEQUENCE_EDITOR = ":"
  env.GIT_PAGER = "cat"
  env.GIT_ALLOW_PROTOCOL = ""
  env.GIT_PROTOCOL_FROM_USER = "0"
  const all = [...fixed, ...overrides]
  env.GIT_CONFIG_COUNT = String(all.length)
  all.forEach(([k, v], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = k
    env[`GIT_CONFIG_VALUE_${i}`] = v
  })
  return { ...env, ...extra }
}

/** Subcommands that never read or write file contents through attributes (no filters, drivers or textconv). */
const PLUMBING = new Set([
  "rev-parse",
  "config",
  "for-each-ref",
  "symbolic-ref",
  "var",
  "cat-file",
  "ls-files",
  "rev-list",
  "show-ref",
  "merge-base",
  "branch",
  "version",
  "update-ref"
])

/**
 * Whether `git <args>` may run a filter, merge driver or textconv, so the repository's drivers must
 * be listed and overridden first. Leading `-c key=value` pairs are skipped.
 */
export const readsContent = (args: ReadonlyArray<string>): boolean => {
  let i = 0
  while (args[i] === "-c") i += 2
  const sub = args[i]
  if (sub === undefined) return false
  if (sub === "worktree") return args[i + 1] !== "list" && args[i + 1] !== "prune"
  if (sub === "cat-file") return args.slice(i + 1).some((a) => a === "--filters" || a === "--textconv")
  return !PLUMBING.has(sub)
}

/** The command that lists the configuration with the scope and file of each value. */
export const LIST_CONFIG: ReadonlyArray<string> = ["config", "--list", "--show-scope", "--show-origin", "-z"]

export interface ConfigEntry {
  /** `system`, `global`, `local`, `worktree` or `command` (includes take the scope of the file including them). */
  readonly scope: string
  /** Where the value comes from, as git prints it: `file:<path>` (relative to where git ran), `command line:`, … */
  readonly origin: string
  /** As git prints it: section and variable lowercased, subsection as written. */
  readonly key: string
  /** `undefined` for a key given without `=` (boolean true). */
  readonly value: string | undefined
}

/** Parse the output of {@link LIST_CONFIG} (`<scope>\0<origin>\0<key>\n<value>\0` records). */
export const parseConfigList = (out: string): Array<ConfigEntry> => {
  const parts = out.split("\0")
  const entries: Array<ConfigEntry> = []
  for (let i = 0; i + 2 < parts.length; i += 3) {
    const scope = parts[i]!
    const origin = parts[i + 1]!
    const rec = parts[i + 2]!
    const nl = rec.indexOf("\n")
    entries.push(
      nl < 0
        ? { scope, origin, key: rec, value: undefined }
        : { scope, origin, key: rec.slice(0, nl), value: rec.slice(nl + 1) }
    )
  }
  return entries
}

// ---------------------------------------------------------------------------------------------
// One listing per configuration

/** A listing's overrides, with the files it depends on and their state when it was made. */
interface Listed {
  readonly overrides: ReadonlyArray<readonly [string, string]>
  readonly files: ReadonlyArray<string>
  readonly signature: string
}

const homeOf = (env: Record<string, string | undefined>) => env.HOME ?? os.homedir()

/**
 * Every file whose change (or appearance) could change what git lists in `cwd`: the files the
 * values came from, the targets of `include.path` / `includeIf.*.path` (also those that do not
 * exist yet), each repository config's `config.worktree`, and the user's global files.
 */
const filesBehind = (
  entries: ReadonlyArray<ConfigEntry>,
  cwd: string,
  env: Record<string, string | undefined>
): Array<string> => {
  const files = new Set<string>()
  for (const e of entries) {
    if (!e.origin.startsWith("file:")) continue
    const file = path.resolve(cwd, e.origin.slice("file:".length))
    files.add(file)
    if (e.scope === "local" && path.basename(file) === "config") {
      files.add(path.join(path.dirname(file), "config.worktree"))
    }
    if ((e.key === "include.path" || /^includeif\..*\.path$/s.test(e.key)) && e.value) {
      const target = e.value.startsWith("~/") ? path.join(homeOf(env), e.value.slice(2)) : e.value
      files.add(path.resolve(path.dirname(file), target))
    }
  }
  if (env.GIT_DIR) {
    files.add(path.resolve(cwd, env.GIT_DIR, "config"))
    files.add(path.resolve(cwd, env.GIT_DIR, "config.worktree"))
  }
  if (env.GIT_CONFIG_GLOBAL) files.add(path.resolve(cwd, env.GIT_CONFIG_GLOBAL))
  else {
    files.add(path.join(homeOf(env), ".gitconfig"))
    files.add(path.join(env.XDG_CONFIG_HOME ?? path.join(homeOf(env), ".config"), "git", "config"))
  }
  return [...files].sort()
}

/**
 * The state of `files` now; `undefined` when one changed too recently to tell it apart from a
 * change right after the listing (file times may be coarse).
 */
const signatureOf = (files: ReadonlyArray<string>): string | undefined => {
  const now = Date.now()
  const parts: Array<string> = []
  for (const f of files) {
    try {
      const st = fs.statSync(f)
      if (now - st.mtimeMs < 2000 || now - st.ctimeMs < 2000) return undefined
      parts.push(`${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`)
    } catch {
      parts.push("-")
    }
  }
  return parts.join("|")
}

const listings = new Map<string, Listed>()
const MAX_LISTINGS = 64

const listingKey = (cwd: string, env: Record<string, string | undefined>) =>
  JSON.stringify([
    path.resolve(cwd),
    env.GIT_DIR ?? "",
    env.GIT_WORK_TREE ?? "",
    env.GIT_CONFIG_GLOBAL ?? "",
    // (where git stops looking for a repository decides which repository's config is listed)
    env.GIT_CEILING_DIRECTORIES ?? "",
    homeOf(env)
  ])

/**
 * The overrides for git run in `cwd` with `env` (made by {@link environment}) when the listing made
 * there last is still current — none of the files behind it changed; otherwise `undefined`: list again.
 */
export const knownOverrides = (
  cwd: string,
  env: Record<string, string | undefined>
): ReadonlyArray<readonly [string, string]> | undefined => {
  const key = listingKey(cwd, env)
  const l = listings.get(key)
  if (l === undefined) return undefined
  if (signatureOf(l.files) !== l.signature) {
    listings.delete(key)
    return undefined
  }
  return l.overrides
}

/**
 * The overrides a fresh listing (the output of {@link LIST_CONFIG} run in `cwd` with `env`) calls
 * for; remembered for {@link knownOverrides} while the files behind it stay as they are.
 */
export const overridesFromListing = (
  out: string,
  cwd: string,
  env: Record<string, string | undefined>
): ReadonlyArray<readonly [string, string]> => {
  const entries = parseConfigList(out)
  const overrides = repoOverrides(entries)
  const files = filesBehind(entries, cwd, env)
  const signature = signatureOf(files)
  const key = listingKey(cwd, env)
  listings.delete(key)
  if (signature !== undefined) {
    listings.set(key, { overrides, files, signature })
    if (listings.size > MAX_LISTINGS) listings.delete(listings.keys().next().value!)
  }
  return overrides
}

/** Scopes whose settings are the user's own; everything else comes with the repository. */
const TRUSTED = new Set(["global", "system", "command"])

/**
 * Overrides for what the repository's own configuration makes git run: every clean, smudge and
 * process filter (off, and not required), merge driver (git's own merge), `merge.default`, diff
 * command (refused) and textconv (`cat`) set in a scope other than the user's global one, and
 * any per-protocol `allow`.
 */
export const repoOverrides = (entries: ReadonlyArray<ConfigEntry>): Array<readonly [string, string]> => {
  const out = new Map<string, string>()
  for (const e of entries) {
    if (TRUSTED.has(e.scope)) continue
    const filter = /^filter\.(.+)\.(clean|smudge|process|required)$/s.exec(e.key)
    if (filter) {
      const d = filter[1]!
      out.set(`filter.${d}.clean`, "")
      out.set(`filter.${d}.smudge`, "")
      out.set(`filter.${d}.process`, "")
      out.set(`filter.${d}.required`, "false")
      continue
    }
    const merge = /^merge\.(.+)\.driver$/s.exec(e.key)
    if (merge) out.set(`merge.${merge[1]!}.driver`, BUILTIN_MERGE)
    else if (e.key === "merge.default") out.set("merge.default", "text")
    else if (/^diff\..+\.command$/s.test(e.key)) out.set(e.key, "false")
    else if (/^diff\..+\.textconv$/s.test(e.key)) out.set(e.key, "cat")
    else if (/^protocol\..+\.allow$/s.test(e.key)) out.set(e.key, "never")
  }
  return [...out]
}

/** Oldest git that honours `GIT_CONFIG_COUNT`, which the overrides travel in. */
export const MIN_VERSION: readonly [number, number] = [2, 31]

let versionChecked: string | null | undefined

const judgeVersion = (r: {
  readonly stdout: string
  readonly stderr: string
  readonly error?: Error | undefined
  readonly status: number | null
}): string | null => {
  const m = /git version (\d+)\.(\d+)/.exec(r.stdout)
  if (r.error || r.status !== 0 || !m) {
    return `git is not available on PATH (${r.error?.message ?? (r.stderr.trim() || "no version")}); install git ${MIN_VERSION.join(".")} or newer`
  }
  const [major, minor] = [Number(m[1]), Number(m[2])]
  return major < MIN_VERSION[0] || (major === MIN_VERSION[0] && minor < MIN_VERSION[1])
    ? `git ${major}.${minor} is too old: muse needs git ${MIN_VERSION.join(".")} or newer`
    : null
}

/** Output of a git process run by {@link run}. */
export interface Ran {
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
  readonly error?: Error | undefined
}

/** One git process {@link steps} asks its driver to run. */
export interface GitCall {
  readonly args: ReadonlyArray<string>
  /** Absent for `git version`, which runs anywhere. */
  readonly cwd?: string | undefined
  readonly env: Record<string, string | undefined>
  readonly input?: string | Uint8Array | undefined
}

const VERSION_ARGS: ReadonlyArray<string> = ["version"]

/** The version check as steps: nothing to run once this process knows the answer. */
function* versionSteps<R extends Ran>(): Generator<GitCall, string | undefined, R> {
  if (versionChecked === undefined) {
    const r = yield { args: VERSION_ARGS, env: environment() }
    // (a process that could not start has no output at all)
    versionChecked ??= judgeVersion({
      status: r.status,
      stdout: r.stdout ?? "",
      stderr: r.stderr ?? "",
      error: r.error
    })
  }
  return versionChecked ?? undefined
}

/**
 * The git processes behind one hardened `git <args>`, in order, whoever runs them: the version
 * check and the configuration listing for a command that may read file contents (each skipped when
 * this process already knows the answer), then the command. The driver answers each yielded
 * {@link GitCall} with what the process gave; the generator returns the command's result, the
 * listing's when that failed, or a string saying why git cannot run at all. {@link runSync} drives
 * it with `spawnSync`, {@link run} with `spawn`; another driver (an Effect, say) can do the same.
 */
export function* steps<R extends Ran>(
  args: ReadonlyArray<string>,
  options: RunSyncOptions
): Generator<GitCall, R | string, R> {
  const extra = options.remote
    ? {
        // git looks for a repository in cwd only, not in the folders above it
        GIT_CEILING_DIRECTORIES: path.dirname(path.resolve(options.cwd)),
        ...remoteEnvironment(),
        ...options.env
      }
    : options.env
  const fixed = options.remote ? REMOTE_FIXED : fixedConfig
  // (a command that reads no contents runs nothing the overrides would stop: no need to ask git its version first)
  if (!readsContent(args) && !options.remote)
    return yield { args, cwd: options.cwd, env: environment([], extra, process.env, fixed), input: options.input }
  const problem = yield* versionSteps<R>()
  if (problem) return problem
  if (options.remote) {
    // the user's transports, ssh and credential helpers run: no repository's configuration may be in scope
    const inside = yield { args: ["rev-parse", "--git-dir"], cwd: options.cwd, env: environment([], extra) }
    if (inside.status === 0) {
      return `git ${args[0] ?? ""} talks to a remote and must run outside any repository, but ${options.cwd} is in one`
    }
  }
  const env = environment([], extra, process.env, fixed)
  let overrides = knownOverrides(options.cwd, env)
  if (!overrides) {
    const list = yield { args: LIST_CONFIG, cwd: options.cwd, env }
    if (list.status !== 0) return list
    overrides = overridesFromListing(list.stdout, options.cwd, env)
  }
  return yield {
    args,
    cwd: options.cwd,
    env: environment(overrides, extra, process.env, fixed),
    input: options.input
  }
}

/** The transports a command with `remote: true` may use (`ext::` and `fd::`, which run programs, are not among them). */
export const REMOTE_PROTOCOLS: ReadonlyArray<string> = ["file", "http", "https", "ssh"]

/**
 * The {@link fixedConfig} of a command that talks to a remote: the user's own ssh command and
 * credential helpers apply (no repository's configuration is in scope); the rest stays.
 */
const REMOTE_FIXED = fixedConfig.filter(([k]) => k !== "core.sshCommand" && k !== "credential.helper")

/** The caller's variables that say how to reach a remote (ssh program, TLS, HTTP, the system config file). */
const TRANSPORT = /^GIT_(SSH|SSH_COMMAND|SSH_VARIANT|SSL_[A-Z_]+|HTTP_[A-Z_]+|PROXY_SSL_[A-Z_]+|CONFIG_SYSTEM)$/

/**
 * What a command that talks to a remote runs with instead of "no transport at all": the
 * {@link REMOTE_PROTOCOLS} (`GIT_ALLOW_PROTOCOL` wins over every `protocol.*` setting), the
 * machine's system config (credential helpers and CA settings live there on many systems) and the
 * caller's transport variables (`GIT_SSH_COMMAND`, `GIT_SSL_CAINFO`, `GIT_HTTP_*`, …); still no prompts.
 */
const remoteEnvironment = (base: NodeJS.ProcessEnv = process.env): Record<string, string> => {
  const env: Record<string, string> = { GIT_ALLOW_PROTOCOL: REMOTE_PROTOCOLS.join(":"), GIT_CONFIG_NOSYSTEM: "0" }
  for (const [k, v] of Object.entries(base)) if (v !== undefined && TRANSPORT.test(k)) env[k] = v
  return env
}

const spawnSyncCall = (call: GitCall): SpawnSyncReturns<string> =>
  spawnSync("git", call.args as Array<string>, {
    cwd: call.cwd,
    encoding: "utf8",
    env: call.env,
    input: call.input,
    // as much as the asynchronous driver takes: a long log or diff is an answer, not an error
    maxBuffer: Number.POSITIVE_INFINITY
  })

const spawnCall = (call: GitCall): Promise<Ran> =>
  new Promise((resolve) => {
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    let error: Error | undefined
    const child = spawn("git", call.args as Array<string>, { cwd: call.cwd, env: call.env })
    child.stdout?.on("data", (b: Buffer) => out.push(b))
    child.stderr?.on("data", (b: Buffer) => err.push(b))
    child.stdin?.on("error", () => {})
    child.on("error", (e) => (error ??= e))
    child.on("close", (status) =>
      resolve({
        status,
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: Buffer.concat(err).toString("utf8"),
        error
      })
    )
    child.stdin?.end(call.input)
  })

let versionSpawn: Promise<Ran> | undefined

/** The asynchronous driver's runner: concurrent version checks share one `git version`. */
const spawnCallShared = (call: GitCall): Promise<Ran> =>
  call.args === VERSION_ARGS ? (versionSpawn ??= spawnCall(call)) : spawnCall(call)

const driveSync = <A>(gen: Generator<GitCall, A, SpawnSyncReturns<string>>): A => {
  let step = gen.next()
  while (!step.done) step = gen.next(spawnSyncCall(step.value))
  return step.value
}

const driveAsync = async <A>(gen: Generator<GitCall, A, Ran>): Promise<A> => {
  let step = gen.next()
  while (!step.done) step = gen.next(await spawnCallShared(step.value))
  return step.value
}

/**
 * Why muse cannot run the `git` on `PATH` (missing, or older than {@link MIN_VERSION}), or
 * `undefined` when it can. Asked once per process.
 */
export const versionProblem = (): string | undefined => driveSync(versionSteps())

/**
 * {@link versionProblem} without blocking: start it early and the later synchronous calls find
 * the answer waiting (same answer, same once-per-process cache).
 */
export const checkVersion = (): Promise<string | undefined> => driveAsync(versionSteps())

export interface RunSyncOptions {
  readonly cwd: string
  /** Variables set after the hardening (e.g. `GIT_INDEX_FILE`, an identity). */
  readonly env?: Record<string, string> | undefined
  readonly input?: string | Uint8Array | undefined
  /**
   * The command talks to a remote (`clone`, `ls-remote`): the {@link REMOTE_PROTOCOLS} are allowed
   * and the user's own ssh command and credential helpers apply. No repository's configuration,
   * which could name programs for those, may be in scope: git does not look above `cwd` for one,
   * and a `cwd` that is a repository is refused.
   */
  readonly remote?: boolean | undefined
}

/**
 * Run `git <args>` synchronously, hardened (for start-up checks). A command that may read file
 * contents first lists the repository's configuration; when that fails, so does the command.
 */
export const runSync = (args: ReadonlyArray<string>, options: RunSyncOptions): SpawnSyncReturns<string> => {
  const r = driveSync(steps<SpawnSyncReturns<string>>(args, options))
  return typeof r === "string"
    ? { pid: 0, output: [], stdout: "", stderr: r, status: 127, signal: null, error: new Error(r) }
    : r
}

/**
 * {@link runSync} without blocking the process: the same steps, the same hardening, the same answer,
 * for checks that run beside other start-up work.
 */
export const run = async (args: ReadonlyArray<string>, options: RunSyncOptions): Promise<Ran> => {
  const r = await driveAsync(steps<Ran>(args, options))
  return typeof r === "string" ? { status: 127, stdout: "", stderr: r, error: new Error(r) } : r
}
