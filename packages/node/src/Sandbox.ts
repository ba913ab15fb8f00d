/**
 * The OS sandbox the commands of `run_shell` run in (and any tool that passes its processes to `prepare`).
 *
 * Modes: `workspace-write` (the default where a sandbox can run): the command reads the machine,
 * writes only the agent's workspace (a crew member's: its own worktree) and a private `/tmp`, with
 * `.git`, `.muse`, `.claude` and muse's own settings read-only inside it, home secrets (`~/.ssh`,
 * `~/.aws`, `~/.config/gh`, …) unreadable, no network (or only allowed hosts, through a proxy),
 * no unix-domain sockets, a bounded number of processes, and no sight of other processes;
 * `read-only`: the same with the workspace read-only too; `off`: no sandbox.
 *
 * Linux uses bubblewrap (`bwrap`): a mount namespace built from read-only and writable binds,
 * fresh network, PID and IPC namespaces, every capability dropped, a seccomp filter, and a process
 * limit (`prlimit --nproc` in a user namespace, or a pids cgroup when muse runs as root), built
 * once per plan (workspace, mode, protected and hidden paths, and the inodes they stand on): a
 * long-lived `bwrap` runs a small supervisor that starts each command inside it through a nested
 * `bwrap` (`internal/sandbox/warm.ts`), in a PID namespace of its own, so the commands of a
 * workspace share its private `/tmp` and its process limit but cannot see or signal each other or
 * the supervisor. `reuse: false` builds a sandbox for every command instead; a supervisor that
 * cannot start gives each command a `bwrap` of its own. macOS
 * uses `sandbox-exec` with a generated profile. Where neither can run (no `bwrap`, a container
 * without user namespaces), `status` says why and commands run without a sandbox, guarded by
 * approvals only: the CLI says so at start and in `/status`.
 *
 * @example
 * ```ts
 * import { Sandbox } from "@musekit/node"
 *
 * const SandboxLive = Sandbox.layer({ mode: "workspace-write", network: { allow: ["registry.npmjs.org"] } })
 * Sandbox.detect().available // false on a machine without bubblewrap, with `reason`
 * const probe = Sandbox.detectInBackground() // the same, without blocking; the layer awaits it
 * ```
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import type { Duplex } from "node:stream"
import { Redactor } from "@musekit/core"
import { Context, Effect, Layer, Schema, type Scope } from "effect"
import { removeLeftovers } from "./internal/deadPids.js"
import { findOnPath } from "./internal/ripgrep.js"
import * as Blocked from "./internal/sandbox/blocked.js"
import { FORWARDER, handleClient, hostMatcher, serveChannel } from "./internal/sandbox/proxy.js"
import * as Seatbelt from "./internal/sandbox/seatbelt.js"
import { unixSocketFilter } from "./internal/sandbox/seccomp.js"
import * as Warm from "./internal/sandbox/warm.js"

export const Mode = Schema.Literal("read-only", "workspace-write", "off")
export type Mode = typeof Mode.Type

export const modes: ReadonlyArray<Mode> = ["read-only", "workspace-write", "off"]

/** What decides how the sandbox behaves; recorded in `session.started` with the session's config. */
export const Settings = Schema.Struct({
  mode: Mode,
  network: Schema.optional(
    Schema.Struct({
      /** Hosts commands may reach through the proxy: `example.com`, `*.example.com`, `host:port`. */
      allow: Schema.Array(Schema.String)
    })
  ),
  /** More folders commands may write (`~/.npm`, a cache), besides the workspace and /tmp. */
  writable: Schema.optional(Schema.Array(Schema.String)),
  /** More paths commands may not read, besides the built-in list of secrets. */
  hidden: Schema.optional(Schema.Array(Schema.String)),
  /** Most processes (threads count) one command may run at once (default 2048). */
  processes: Schema.optional(Schema.Int.pipe(Schema.greaterThanOrEqualTo(16))),
  /**
   * Linux: run the commands of a workspace in one long-lived sandbox, started at its first command,
   * each command in a PID namespace of its own (default true); `false` builds a new sandbox for
   * every command (tens of milliseconds more each; see docs/security.md).
   */
  reuse: Schema.optional(Schema.Boolean)
})
export type Settings = typeof Settings.Type

export const defaultSettings: Settings = { mode: "workspace-write" }

export const DEFAULT_PROCESSES = 2048

/** Home-relative paths no sandboxed command may read: credentials and keys. */
export const SECRETS: ReadonlyArray<string> = [
  ".ssh",
  ".aws",
  ".azure",
  ".gnupg",
  ".docker",
  ".kube",
  ".netrc",
  ".git-credentials",
  ".pgpass",
  ".config/gh",
  ".config/hub",
  ".config/git/credentials",
  ".config/gcloud",
  ".config/op",
  ".config/muse/trusted.json",
  ".password-store",
  ".local/share/keyrings",
  ".vault-token",
  ".terraform.d/credentials.tfrc.json",
  ".cargo/credentials",
  ".cargo/credentials.toml",
  ".gem/credentials",
  ".mozilla",
  ".config/google-chrome",
  ".config/chromium",
  ".config/BraveSoftware",
  ".bash_history",
  ".zsh_history",
  ".python_history",
  ".node_repl_history",
  ".local/share/fish/fish_history"
]

/** Secret files whose tools must still find them: they read as empty instead of failing. */
export const EMPTIED: ReadonlyArray<string> = [".npmrc", ".yarnrc.yml", ".pypirc"]

/** Folders in a writable root that stay read-only: what git and agents run or obey. */
export const PROTECTED: ReadonlyArray<string> = [".git", ".muse", ".claude"]

/** Environment variables a sandboxed command does not get (agents and sockets it must not reach). */
const DROPPED_ENV = [
  "SSH_AUTH_SOCK",
  "SSH_AGENT_PID",
  "GPG_AGENT_INFO",
  "DBUS_SESSION_BUS_ADDRESS",
  "XDG_RUNTIME_DIR",
  // muse's own: where the log is (a database URL holds its password) and a cluster session's tie to its runner
  "MUSE_LOG",
  "MUSE_EXIT_WITH_PARENT",
  "PGPASSFILE"
]

// ---------------------------------------------------------------------------------------------
// what this machine can do
// ---------------------------------------------------------------------------------------------

export type ProcessLimit =
  | { readonly _tag: "prlimit"; readonly path: string }
  | { readonly _tag: "cgroup"; readonly dir: string }
  | { readonly _tag: "none"; readonly reason: string }

export interface Availability {
  readonly backend: "bubblewrap" | "sandbox-exec" | "none"
  readonly available: boolean
  /** Why no sandbox can run (with what to do about it). */
  readonly reason?: string | undefined
  /** The program that builds the sandbox. */
  readonly program?: string | undefined
  /** Unix-domain sockets are refused (the seccomp filter could be installed). */
  readonly unixSocketsBlocked: boolean
  readonly processLimit: ProcessLimit
}

const isRoot = () => typeof process.getuid === "function" && process.getuid() === 0

/** Groups left by a muse process that was killed before it could remove them. */
const removeStaleCgroups = (dir: string) =>
  removeLeftovers(
    dir,
    (name) => /^muse-(\d+)-\d+$/.exec(name)?.[1],
    (group) => fs.rmdirSync(group)
  )

/** The pids cgroup muse may create child groups in (root only), or why there is none. */
const findPidsCgroup = (): ProcessLimit => {
  let lines: Array<string>
  try {
    lines = fs.readFileSync("/proc/self/cgroup", "utf8").trim().split("\n")
  } catch {
    return { _tag: "none", reason: "no cgroups" }
  }
  const candidates: Array<string> = []
  const v1 = lines.map((l) => /^\d+:([^:]*):(.*)$/.exec(l)).find((m) => m && m[1]!.split(",").includes("pids"))
  if (v1) candidates.push(path.join("/sys/fs/cgroup/pids", v1[2]!), path.join("/sys/fs/cgroup/pids"))
  const v2 = lines.map((l) => /^0::(.*)$/.exec(l)).find((m) => m)
  if (v2) {
    for (const mnt of ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]) {
      try {
        if (fs.readFileSync(path.join(mnt, "cgroup.controllers"), "utf8").split(/\s+/).includes("pids"))
          candidates.push(path.join(mnt, v2[1]!))
      } catch {}
    }
  }
  for (const dir of candidates) {
    const probe = path.join(dir, `muse-probe-${process.pid}`)
    try {
      fs.mkdirSync(probe)
      const ok = fs.existsSync(path.join(probe, "pids.max"))
      fs.rmdirSync(probe)
      if (ok) {
        removeStaleCgroups(dir)
        return { _tag: "cgroup", dir }
      }
    } catch {
      try {
        fs.rmdirSync(probe)
      } catch {}
    }
  }
  return { _tag: "none", reason: "muse runs as root and no pids cgroup is writable" }
}

/**
 * Run `bwrap` once as a command would be run (see `bwrapArgs`), in a throw-away workspace: the
 * command writes the workspace and /tmp, and must not be able to write `.git`.
 */
function* probeSetup(
  bwrap: string,
  filter: Buffer | undefined
): Generator<ProbeRun, { readonly status: number | null; readonly error: string }, ProbeResult> {
  let dir: string | undefined
  let fd: number | undefined
  try {
    dir = realOr(fs.mkdtempSync(path.join(os.tmpdir(), "muse-sandbox-probe-")))
    const ws = path.join(dir, "ws")
    const tmp = path.join(dir, "tmp")
    const hidden = path.join(dir, "hidden")
    fs.mkdirSync(path.join(ws, ".git"), { recursive: true })
    fs.mkdirSync(tmp, { mode: 0o700 })
    fs.mkdirSync(hidden)
    const unreadable = path.join(dir, "unreadable")
    fs.writeFileSync(unreadable, "", { mode: 0o000 })
    const blank = path.join(dir, "blank")
    fs.writeFileSync(blank, "", { mode: 0o444 })
    const secret = path.join(dir, "secret")
    fs.writeFileSync(secret, "s")
    const emptied = path.join(dir, "emptied")
    fs.writeFileSync(emptied, "e")
    if (filter) {
      fs.writeFileSync(path.join(dir, "filter.bpf"), filter)
      fd = fs.openSync(path.join(dir, "filter.bpf"), "r")
    }
    const args = bwrapArgs({
      mode: "workspace-write",
      cwd: ws,
      writable: [ws],
      readOnly: [path.join(ws, ".git")],
      hiddenDirs: [hidden],
      hiddenFiles: [secret],
      emptiedFiles: [emptied],
      tmp,
      unreadable,
      blank,
      maskRun: fs.existsSync("/run"),
      seccompFd: fd === undefined ? undefined : 3,
      root: isRoot()
    })
    const r = yield {
      file: bwrap,
      args: [
        ...args,
        "--",
        "/bin/sh",
        "-c",
        "echo ok > probe && echo ok > /tmp/probe && ! (echo x > .git/x) 2>/dev/null"
      ],
      fds: fd === undefined ? [] : [fd]
    }
    const said =
      String(r.stderr ?? "")
        .trim()
        .split("\n")[0] ?? ""
    if (r.error) return { status: null, error: r.error.message }
    if (r.status !== 0) return { status: r.status, error: said || `exit ${r.status}` }
    if (!fs.existsSync(path.join(ws, "probe")) || !fs.existsSync(path.join(tmp, "probe")))
      return { status: -1, error: "a command in the sandbox could not write its workspace" }
    if (fs.existsSync(path.join(ws, ".git", "x")))
      return { status: -1, error: "the sandbox did not keep .git read-only" }
    return { status: 0, error: "" }
  } catch (e) {
    return { status: null, error: e instanceof Error ? e.message : String(e) }
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
    if (dir) fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** A process the probe runs (stdin and stdout ignored, stderr read, `fds` from fd 3 on), and how it ended. */
interface ProbeRun {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly fds: ReadonlyArray<number>
}
interface ProbeResult {
  readonly status: number | null
  readonly stderr: string
  readonly error?: Error | undefined
}

const PROBE_TIMEOUT_MS = 10_000

const runProbeSync = (run: ProbeRun): ProbeResult => {
  const r = spawnSync(run.file, run.args as Array<string>, {
    stdio: ["ignore", "ignore", "pipe", ...run.fds],
    timeout: PROBE_TIMEOUT_MS,
    encoding: "utf8",
    cwd: "/"
  })
  return { status: r.status, stderr: String(r.stderr ?? ""), error: r.error }
}

const runProbe = (run: ProbeRun): Promise<ProbeResult> =>
  new Promise((resolve) => {
    let stderr = ""
    let error: Error | undefined
    const child = spawn(run.file, run.args as Array<string>, {
      stdio: ["ignore", "ignore", "pipe", ...run.fds],
      timeout: PROBE_TIMEOUT_MS,
      cwd: "/"
    })
    child.stderr?.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    child.on("error", (e) => (error ??= e))
    child.on("close", (status) => resolve({ status, stderr, error }))
  })

let detected: Availability | undefined
let detecting: Promise<Availability> | undefined

/** What sandbox this machine can run (probed once per process: one `bwrap` run of a few ms). */
export const detect = (options: { readonly refresh?: boolean } = {}): Availability => {
  if (detected && !options.refresh) return detected
  const steps = detectSteps()
  let step = steps.next()
  while (!step.done) step = steps.next(runProbeSync(step.value))
  detected = step.value
  return detected
}

/**
 * {@link detect} without blocking: the probe's processes run while the caller goes on (a session
 * starts it first thing and waits for it only where the answer is needed). Same answer, same
 * once-per-process cache.
 */
export const detectInBackground = (options: { readonly refresh?: boolean } = {}): Promise<Availability> => {
  if (detected && !options.refresh) return Promise.resolve(detected)
  if (detecting && !options.refresh) return detecting
  const probing = (async () => {
    const steps = detectSteps()
    let step = steps.next()
    while (!step.done) step = steps.next(await runProbe(step.value))
    if (options.refresh || !detected) detected = step.value
    return step.value
  })()
  detecting = probing
  return probing
}

function* detectSteps(): Generator<ProbeRun, Availability, ProbeResult> {
  if (process.platform === "darwin") {
    const program = "/usr/bin/sandbox-exec"
    if (!fs.existsSync(program))
      return {
        backend: "none",
        available: false,
        reason: `${program} is missing`,
        unixSocketsBlocked: false,
        processLimit: { _tag: "none", reason: "no sandbox" }
      }
    const r = yield { file: program, args: ["-p", "(version 1)(allow default)", "/usr/bin/true"], fds: [] }
    return r.status === 0
      ? {
          backend: "sandbox-exec",
          available: true,
          program,
          unixSocketsBlocked: false,
          processLimit: { _tag: "none", reason: "macOS limits processes per user, not per command" }
        }
      : {
          backend: "none",
          available: false,
          reason: `sandbox-exec does not run here (${(r.stderr || r.error?.message || "").trim() || `exit ${r.status}`}); a nested sandbox cannot start another`,
          unixSocketsBlocked: false,
          processLimit: { _tag: "none", reason: "no sandbox" }
        }
  }
  if (process.platform !== "linux") {
    return {
      backend: "none",
      available: false,
      reason: `no sandbox for ${process.platform}`,
      unixSocketsBlocked: false,
      processLimit: { _tag: "none", reason: "no sandbox" }
    }
  }
  const bwrap = findOnPath("bwrap")
  if (!bwrap) {
    return {
      backend: "none",
      available: false,
      reason: "bubblewrap (bwrap) is not installed; install it (Debian/Ubuntu: apt-get install bubblewrap)",
      unixSocketsBlocked: false,
      processLimit: { _tag: "none", reason: "no sandbox" }
    }
  }
  // one run with what a real command gets (a writable workspace with a read-only `.git`, a private
  // /tmp, hidden files and folders, the seccomp filter): a machine that runs bwrap but not these
  // has no sandbox, and says why, instead of failing every command
  const filter = unixSocketFilter()
  const withFilter = filter ? yield* probeSetup(bwrap, filter) : undefined
  const unixSocketsBlocked = withFilter?.status === 0
  const setup = withFilter && unixSocketsBlocked ? withFilter : yield* probeSetup(bwrap, undefined)
  if (setup.status !== 0) {
    const err = setup.error
    return {
      backend: "none",
      available: false,
      reason: /namespace|Operation not permitted/i.test(err)
        ? `bubblewrap cannot create namespaces here (${err}): user namespaces are off, or muse runs in a container that does not allow them`
        : `bubblewrap does not run here: ${err}`,
      program: bwrap,
      unixSocketsBlocked: false,
      processLimit: { _tag: "none", reason: "no sandbox" }
    }
  }
  let processLimit: ProcessLimit
  if (isRoot()) processLimit = findPidsCgroup()
  else {
    const prlimit = findOnPath("prlimit")
    processLimit = prlimit
      ? { _tag: "prlimit", path: prlimit }
      : { _tag: "none", reason: "prlimit (util-linux) is not installed" }
  }
  return { backend: "bubblewrap", available: true, program: bwrap, unixSocketsBlocked, processLimit }
}

// ---------------------------------------------------------------------------------------------
// the service
// ---------------------------------------------------------------------------------------------

/** How the sandbox stands, for `/status` and the start of a session. */
export interface Status {
  readonly mode: Mode
  /** Commands run in a sandbox now (`mode` is not `off` and one is available). */
  readonly active: boolean
  readonly availability: Availability
  readonly network: ReadonlyArray<string>
  readonly writable: ReadonlyArray<string>
  readonly processes: number
  /**
   * How commands get their sandbox: `long-lived` (Linux, the default: one per workspace, started at
   * its first command), or `per-command` (`reuse: false`; macOS; or when the long-lived one could
   * not start, with `launchReason`).
   */
  readonly launch: "long-lived" | "per-command"
  readonly launchReason?: string | undefined
}

/** How to start one sandboxed process. */
export interface Launch {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly env: NodeJS.ProcessEnv
  /** Descriptors from fd 3 on: an open descriptor of this process, or a new pipe. */
  readonly stdio: ReadonlyArray<number | "pipe">
  /** Call right after the spawn (starts the proxy channel, puts the process in its cgroup). */
  readonly started: (child: ChildProcess) => void
  /** The mode it runs in. */
  readonly mode: "read-only" | "workspace-write"
  /** What `explain` needs to read the command's output. */
  readonly context: Blocked.Context
  /** Start the command in the long-lived sandbox instead of spawning `file` (Linux). */
  readonly run?: (() => Warm.WarmChild) | undefined
}

export interface Request {
  /** The program and its arguments, e.g. `["sh", "-c", "npm test"]`. */
  readonly argv: ReadonlyArray<string>
  readonly cwd: string
  /** The folder the command may write (the agent's workspace root). */
  readonly root: string
  /** `read`: the workspace is read-only whatever the mode (a tool that only reads). */
  readonly access?: "read" | "write" | undefined
  readonly env?: NodeJS.ProcessEnv | undefined
}

export interface Service {
  readonly mode: Effect.Effect<Mode>
  readonly setMode: (mode: Mode) => Effect.Effect<void>
  readonly status: Effect.Effect<Status>
  /**
   * How to start `request` in the sandbox, or `undefined` when it runs without one (mode `off`,
   * or no sandbox available). Resources it takes are released with the scope.
   */
  readonly prepare: (request: Request) => Effect.Effect<Launch | undefined, never, Scope.Scope>
  /** What the sandbox blocked, read from the output of a command it ran. */
  readonly explain: (launch: Launch, output: string) => ReadonlyArray<string>
}

export class Sandbox extends Context.Tag("@musekit/node/Sandbox")<Sandbox, Service>() {}

export interface Options {
  /** More paths that stay read-only when they lie in a writable folder (the user's muse config). */
  readonly readOnly?: ReadonlyArray<string> | undefined
  /** More paths to hide (muse's state directory). */
  readonly hidden?: ReadonlyArray<string> | undefined
  /** The home folder whose secrets are hidden (default `os.homedir()`). */
  readonly home?: string | undefined
  /** Use this availability instead of probing (tests). */
  readonly availability?: Availability | undefined
  /** Called with the service once it is built (a UI asks it for `status`: what it actually uses). */
  readonly built?: ((service: Service) => void) | undefined
  /**
   * The long-lived sandbox keeps the launch of the next command ready ahead of it (default `true`;
   * `false` starts each launch when its command comes, as `pnpm bench sandbox` compares).
   */
  readonly spare?: boolean | undefined
}

const expand = (p: string, home: string) =>
  p === "~" ? home : p.startsWith("~/") ? path.join(home, p.slice(2)) : path.resolve(p)

const realOr = (p: string) => {
  // most of the paths asked about (secrets, config files) are not there: said without an exception
  if (!exists(p)) return p
  try {
    return fs.realpathSync.native(p)
  } catch {
    return p
  }
}

const within = (p: string, dir: string) => p === dir || p.startsWith(dir === "/" ? "/" : `${dir}/`)

function exists(p: string): boolean {
  try {
    return fs.lstatSync(p, { throwIfNoEntry: false }) !== undefined
  } catch {
    return false
  }
}

/** The git directories a worktree's `.git` file points to (its own and the shared one). */
const gitDirsOf = (dotGit: string): Array<string> => {
  try {
    if (!fs.lstatSync(dotGit).isFile()) return []
    const m = /^gitdir:\s*(.+?)\s*$/m.exec(fs.readFileSync(dotGit, "utf8"))
    if (!m) return []
    const dir = realOr(path.resolve(path.dirname(dotGit), m[1]!))
    const out = [dir]
    try {
      const common = fs.readFileSync(path.join(dir, "commondir"), "utf8").trim()
      if (common) out.push(realOr(path.resolve(dir, common)))
    } catch {}
    return out
  } catch {
    return []
  }
}

/** Some folder of `PATH` lies under /tmp (where the sandbox has a /tmp of its own). */
const tmpOnPath = (PATH: string | undefined) =>
  (PATH ?? "").split(path.delimiter).some((d) => d !== "" && within(path.resolve(d), "/tmp"))

/** Drop paths that lie under another in the list (a mount over the parent covers them). */
const outermost = (paths: ReadonlyArray<string>) => {
  const sorted = [...new Set(paths)].sort((a, b) => a.length - b.length)
  const out: Array<string> = []
  for (const p of sorted) if (!out.some((o) => within(p, o))) out.push(p)
  return out
}

export interface BwrapPlan {
  readonly mode: "read-only" | "workspace-write"
  readonly cwd: string
  readonly writable: ReadonlyArray<string>
  readonly readOnly: ReadonlyArray<string>
  readonly hiddenDirs: ReadonlyArray<string>
  readonly hiddenFiles: ReadonlyArray<string>
  readonly emptiedFiles: ReadonlyArray<string>
  /** The private /tmp (a host folder). */
  readonly tmp: string
  /** Host files bound over hidden and emptied files. */
  readonly unreadable: string
  readonly blank: string
  readonly maskRun: boolean
  readonly seccompFd?: number | undefined
  readonly root: boolean
  /** Capabilities kept after all are dropped (the long-lived sandbox's supervisor as root). */
  readonly keepCaps?: ReadonlyArray<string> | undefined
}

/** The `bwrap` arguments for a plan (without the command). */
export const bwrapArgs = (plan: BwrapPlan): Array<string> => {
  const a = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
  if (plan.maskRun) a.push("--tmpfs", "/run")
  a.push("--bind", plan.tmp, "/tmp")
  if (plan.mode === "workspace-write") for (const w of plan.writable) a.push("--bind", w, w)
  for (const r of plan.readOnly) a.push("--ro-bind", r, r)
  for (const d of plan.hiddenDirs) a.push("--perms", "0000", "--tmpfs", d, "--remount-ro", d)
  for (const f of plan.hiddenFiles) a.push("--ro-bind", plan.unreadable, f)
  for (const f of plan.emptiedFiles) a.push("--ro-bind", plan.blank, f)
  a.push("--unshare-net", "--unshare-pid", "--unshare-ipc")
  if (!plan.root) a.push("--unshare-user")
  a.push("--cap-drop", "ALL")
  for (const c of plan.keepCaps ?? []) a.push("--cap-add", c)
  a.push("--die-with-parent", "--chdir", plan.cwd)
  if (plan.seccompFd !== undefined) a.push("--seccomp", String(plan.seccompFd))
  return a
}

/** The environment of a sandboxed command: no secrets, no agent sockets, its own /tmp. */
export const sandboxEnv = (env: NodeJS.ProcessEnv, tmp: string, mode: Mode): NodeJS.ProcessEnv => {
  const out: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || Redactor.secretName.test(k) || DROPPED_ENV.includes(k)) continue
    out[k] = v
  }
  for (const k of ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]) delete out[k]
  out.TMPDIR = tmp
  out.MUSE_SANDBOX = mode
  return out
}

const SEC = 3
const PROXY = 4
const GATE = 5

export const make = (settings: Settings, options: Options = {}): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.gen(function* () {
    let mode: Mode = settings.mode
    const availability = options.availability ?? (yield* Effect.promise(() => detectInBackground()))
    const home = options.home ?? os.homedir()
    const processes = settings.processes ?? DEFAULT_PROCESSES
    const allowHosts = [...(settings.network?.allow ?? [])]
    const allowed = hostMatcher(allowHosts)
    const extraWritable = (settings.writable ?? []).map((p) => realOr(expand(p, home)))
    const extraHidden = [...(settings.hidden ?? []), ...(options.hidden ?? [])].map((p) => realOr(expand(p, home)))
    const extraReadOnly = (options.readOnly ?? []).map((p) => realOr(expand(p, home)))

    // the sandbox's own files: a private /tmp per writable root, the files bound over secrets, the filter
    const base = yield* Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "muse-sandbox-"))),
      (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
    )
    const unreadable = path.join(base, "unreadable")
    fs.writeFileSync(unreadable, "", { mode: 0o000 })
    fs.chmodSync(unreadable, 0o000)
    const blank = path.join(base, "blank")
    fs.writeFileSync(blank, "", { mode: 0o444 })
    const filter = availability.unixSocketsBlocked ? unixSocketFilter() : undefined
    const filterFile = path.join(base, "seccomp.bpf")
    if (filter) fs.writeFileSync(filterFile, filter)
    const tmps = new Map<string, string>()
    const tmpFor = (root: string) => {
      let t = tmps.get(root)
      if (!t) {
        t = path.join(base, `tmp-${createHash("sha256").update(root).digest("hex").slice(0, 12)}`)
        fs.mkdirSync(t, { recursive: true, mode: 0o700 })
        tmps.set(root, t)
      }
      return t
    }
    let cgroups = 0
    /**
     * A pids cgroup for one sandbox (where muse runs as root), or `undefined`: its process waits on
     * a gate pipe (`gated`) until `enter` has moved it in, so nothing it starts escapes the limit.
     */
    const makeCgroup = (stdio: Array<number | "pipe">) => {
      const limit = availability.processLimit
      if (limit._tag !== "cgroup") return undefined
      const dir = path.join(limit.dir, `muse-${process.pid}-${++cgroups}`)
      try {
        fs.mkdirSync(dir)
        fs.writeFileSync(path.join(dir, "pids.max"), String(processes))
      } catch {
        removeCgroup(dir)
        return undefined
      }
      stdio[GATE - 3] = "pipe"
      return {
        enter: (child: ChildProcess) => {
          const gate = (child.stdio as ReadonlyArray<unknown>)[GATE] as Duplex | null | undefined
          gate?.on("error", () => {})
          try {
            if (child.pid !== undefined) fs.writeFileSync(path.join(dir, "cgroup.procs"), String(child.pid))
          } catch {}
          gate?.end("go\n")
        },
        remove: () => removeCgroup(dir)
      }
    }
    /** How to spawn `bwrap` with its arguments: behind the cgroup's gate when there is one. */
    const gated = (cgroup: unknown, bwrap: ReadonlyArray<string>) => ({
      file: cgroup ? "/bin/sh" : availability.program!,
      args: cgroup
        ? ["-c", `read -r _ <&${GATE}; exec ${GATE}<&-; exec "$@"`, "sh", availability.program!, ...bwrap]
        : [...bwrap]
    })

    // the long-lived sandboxes: one per plan (writable root, mode, hidden paths…), started lazily
    const reuse = settings.reuse !== false && availability.backend === "bubblewrap"
    let reuseFailed: string | undefined
    const warms = new Map<string, { warm: Promise<Warm.Warm>; used: number; identity: string }>()
    /** Where refusals of the shared proxy go: the commands running now. */
    const listening = new Set<Array<string>>()
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        const all = [...warms.values()]
        warms.clear()
        for (const w of all) (await w.warm.catch(() => undefined))?.stop()
      })
    )

    // macOS: the proxy listens on a local port the profile lets commands reach
    let macProxy: { readonly port: number; readonly refused: Array<string> } | undefined
    const macProxyPort = (refused: Array<string>) =>
      Effect.gen(function* () {
        if (macProxy) return macProxy.port
        const got = yield* Effect.acquireRelease(
          Effect.async<{ server: net.Server; port: number }>((resume) => {
            const server = net.createServer((c) =>
              handleClient(c, { allowed, refused: (h) => macProxy?.refused.push(h) })
            )
            server.listen(0, "127.0.0.1", () =>
              resume(Effect.succeed({ server, port: (server.address() as net.AddressInfo).port }))
            )
          }),
          ({ server }) => Effect.sync(() => server.close())
        )
        macProxy = { port: got.port, refused }
        return got.port
      })

    const plan = (request: Request, active: "read-only" | "workspace-write") => {
      const root = realOr(request.root)
      const writable =
        active === "workspace-write" && request.access !== "read" ? outermost([root, ...extraWritable]) : []
      const readOnly: Array<string> = []
      // a workspace that is not writable is still seen, also where the sandbox puts its own /tmp or /run
      if (!writable.some((w) => within(root, w))) readOnly.push(root)
      for (const w of writable) {
        for (const name of PROTECTED) {
          const p = path.join(w, name)
          if (!exists(p)) continue
          readOnly.push(p)
          for (const g of gitDirsOf(p)) if (writable.some((x) => within(g, x))) readOnly.push(g)
        }
        for (const p of extraReadOnly) if (within(p, w) && exists(p)) readOnly.push(p)
      }
      const cwd = realOr(request.cwd)
      // what a mount would cover that must stay: a writable folder or the working directory inside
      const keeps = (p: string) => writable.some((w) => within(w, p)) || within(cwd, p)
      const visible = (p: string) =>
        (!within(p, "/tmp") || writable.some((w) => within(p, w))) &&
        (!within(p, "/run") || writable.some((w) => within(p, w))) &&
        !within(p, "/proc") &&
        !within(p, "/dev")
      const hiddenDirs: Array<string> = []
      const hiddenFiles: Array<string> = []
      const emptiedFiles: Array<string> = []
      const hiddenAll = [...SECRETS.map((s) => path.join(home, s)), ...extraHidden]
      for (const p0 of outermost(hiddenAll.map(realOr))) {
        if (!exists(p0) || !visible(p0) || keeps(p0)) continue
        let st: fs.Stats
        try {
          st = fs.statSync(p0)
        } catch {
          continue
        }
        if (st.isDirectory()) hiddenDirs.push(p0)
        else if (st.isFile()) hiddenFiles.push(p0)
      }
      for (const e of EMPTIED) {
        const p = realOr(path.join(home, e))
        if (!exists(p) || !visible(p) || hiddenDirs.some((d) => within(p, d))) continue
        try {
          if (fs.statSync(p).isFile()) emptiedFiles.push(p)
        } catch {}
      }
      return {
        mode: active,
        cwd,
        writable,
        readOnly: outermost(readOnly),
        hiddenDirs,
        hiddenFiles: hiddenFiles.filter((f) => !hiddenDirs.some((d) => within(f, d))),
        emptiedFiles,
        tmp: tmpFor(root),
        unreadable,
        blank,
        maskRun: fs.existsSync("/run") && !writable.some((w) => within(w, "/run")) && !within(cwd, "/run"),
        root: isRoot()
      }
    }

    /**
     * The long-lived sandbox for a plan, started at its first command (shared by those that ask at
     * once), held for the caller (a sandbox retired meanwhile waits until `release`): the check that
     * it still takes commands and the hold happen in one step, so a retirement cannot fall between.
     */
    const warmFor = (
      p: ReturnType<typeof plan>
    ): Promise<{ readonly warm: Warm.Warm; readonly release: () => void }> => {
      const key = JSON.stringify({ ...p, cwd: undefined })
      const id = identity(p)
      const had = warms.get(key)
      const held = (entry: { readonly warm: Promise<Warm.Warm> }) =>
        entry.warm.then((w) => {
          if (w.alive()) return { warm: w, release: w.hold() }
          if (warms.get(key) === entry) warms.delete(key)
          return warmFor(p)
        })
      if (had && had.identity === id) {
        had.used = Date.now()
        return held(had)
      }
      // a file under its mounts was replaced since it started: it ends once its commands have
      if (had) {
        warms.delete(key)
        void had.warm.then(
          (w) => w.retire(),
          () => {}
        )
      }
      // a few at most: the idle one used longest ago makes room
      if (warms.size >= 8) {
        const oldest = [...warms.entries()].sort((a, b) => a[1].used - b[1].used)[0]!
        warms.delete(oldest[0])
        void oldest[1].warm.then(
          (w) => w.retire(),
          () => {}
        )
      }
      const warm = startWarm(p)
      const entry = { warm, used: Date.now(), identity: id }
      warms.set(key, entry)
      warm.catch(() => {
        if (warms.get(key) === entry) warms.delete(key)
      })
      return held(entry)
    }

    const startWarm = (p: ReturnType<typeof plan>): Promise<Warm.Warm> => {
      const stdio: Array<number | "pipe"> = []
      let fd: number | undefined
      if (filter) {
        fd = fs.openSync(filterFile, "r")
        stdio[SEC - 3] = fd
      }
      const proxied = allowHosts.length > 0
      if (proxied) stdio[PROXY - 3] = "pipe"
      const limit = availability.processLimit
      const cgroup = makeCgroup(stdio)
      for (let i = 0; i < stdio.length; i++) if (stdio[i] === undefined) stdio[i] = "pipe"
      const inner = [
        ...(limit._tag === "prlimit" ? [limit.path, `--nproc=${processes}:${processes}`, "--"] : []),
        process.execPath,
        ...Warm.supervisorArgs({
          proxy: proxied ? PROXY : undefined,
          nest: Warm.nestArgs(availability.program!, p.root),
          spare: options.spare
        })
      ]
      // as root there is no user namespace to nest: the supervisor keeps what a nested PID
      // namespace and its /proc need (each command drops every capability)
      const keepCaps = p.root ? ["CAP_SYS_ADMIN", "CAP_SETPCAP"] : []
      const bwrap = [...bwrapArgs({ ...p, keepCaps, seccompFd: fd === undefined ? undefined : SEC }), "--", ...inner]
      const started = Warm.start({
        ...gated(cgroup, bwrap),
        // the supervisor's own: each command gets the environment it asks for
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, TMPDIR: "/tmp", LANG: process.env.LANG ?? "C" },
        stdio,
        started: (child) => {
          if (fd !== undefined) fs.closeSync(fd)
          fd = undefined
          if (proxied) {
            const channel = (child.stdio as ReadonlyArray<unknown>)[PROXY] as Duplex | null | undefined
            if (channel)
              serveChannel(channel, {
                allowed,
                refused: (h) => {
                  for (const r of listening) r.push(h)
                }
              })
          }
          cgroup?.enter(child)
        },
        ended: () => cgroup?.remove()
      })
      return started.finally(() => {
        if (fd !== undefined) fs.closeSync(fd)
      })
    }

    const prepare = (request: Request): Effect.Effect<Launch | undefined, never, Scope.Scope> =>
      Effect.gen(function* () {
        const m = mode
        if (m === "off" || !availability.available) return undefined
        const p = plan(request, m)
        // a PATH folder under /tmp is out of sight in the sandbox (it has a /tmp of its own), so a
        // program found there runs from where it really is; only such a PATH is searched here
        const program = request.argv[0] ?? ""
        const env0 = request.env ?? process.env
        const found = program.includes("/") || !tmpOnPath(env0.PATH) ? undefined : findOnPath(program, env0)
        const argv = found && within(found, "/tmp") ? [realOr(found), ...request.argv.slice(1)] : request.argv
        const refused: Array<string> = []
        const limit = availability.processLimit
        const context = (limit: number | undefined): Blocked.Context => ({
          mode: m,
          cwd: p.cwd,
          writable: p.writable,
          readOnly: p.readOnly,
          hidden: [...p.hiddenDirs, ...p.hiddenFiles],
          allowedHosts: allowHosts,
          refusedHosts: refused,
          processLimit: limit,
          unixSocketsBlocked: availability.unixSocketsBlocked
        })
        if (availability.backend === "sandbox-exec") {
          const port = allowHosts.length > 0 ? yield* macProxyPort(refused) : undefined
          const tmp = p.tmp
          const profile = Seatbelt.profile({
            writable: [...p.writable, tmp],
            readOnly: p.readOnly,
            hidden: [...p.hiddenDirs, ...p.hiddenFiles],
            proxyPort: port
          })
          const env = sandboxEnv(request.env ?? process.env, tmp, m)
          if (port !== undefined) {
            const url = `http://127.0.0.1:${port}`
            Object.assign(env, { HTTP_PROXY: url, HTTPS_PROXY: url, http_proxy: url, https_proxy: url })
          }
          return {
            file: availability.program!,
            args: ["-p", profile, ...argv],
            env,
            stdio: [],
            started: () => {},
            mode: m,
            context: context(undefined)
          } satisfies Launch
        }
        // bubblewrap: the long-lived sandbox of this plan, else one for this command
        if (reuse && !reuseFailed) {
          const warm = yield* Effect.promise(() =>
            warmFor(p).then(
              (w) => w,
              (e: Error) => e
            )
          )
          if (warm instanceof Error) reuseFailed = warm.message
          else {
            // a prepared command counts as a user: a sandbox retired before it runs waits for it
            const release = warm.release
            yield* Effect.addFinalizer(() => Effect.sync(release))
            listening.add(refused)
            yield* Effect.addFinalizer(() => Effect.sync(() => listening.delete(refused)))
            const env = sandboxEnv(request.env ?? process.env, "/tmp", m)
            return {
              file: availability.program!,
              args: [],
              env,
              stdio: [],
              started: () => {},
              mode: m,
              context: context(limit._tag === "none" ? undefined : processes),
              run: () => {
                const child = warm.warm.run({ argv, cwd: p.cwd, env })
                release()
                return child
              }
            } satisfies Launch
          }
        }
        const stdio: Array<number | "pipe"> = []
        const release: Array<() => void> = []
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const f of release) f()
          })
        )
        let seccompFd: number | undefined
        if (filter) {
          const fd = fs.openSync(filterFile, "r")
          release.push(() => {
            try {
              fs.closeSync(fd)
            } catch {}
          })
          stdio[SEC - 3] = fd
          seccompFd = SEC
        }
        const proxied = allowHosts.length > 0
        if (proxied) stdio[PROXY - 3] = "pipe"
        const cgroup = makeCgroup(stdio)
        if (cgroup) release.push(cgroup.remove)
        for (let i = 0; i < stdio.length; i++) if (stdio[i] === undefined) stdio[i] = "pipe"
        const inner = [
          ...(limit._tag === "prlimit" ? [limit.path, `--nproc=${processes}:${processes}`, "--"] : []),
          ...(proxied ? [process.execPath, "-e", FORWARDER, String(PROXY)] : []),
          ...argv
        ]
        const bwrap = [...bwrapArgs({ ...p, seccompFd }), "--", ...inner]
        const env = sandboxEnv(request.env ?? process.env, "/tmp", m)
        const launch: Launch = {
          ...gated(cgroup, bwrap),
          env,
          stdio,
          started: (child) => {
            if (proxied) {
              const channel = (child.stdio as ReadonlyArray<unknown>)[PROXY] as Duplex | null | undefined
              if (channel) serveChannel(channel, { allowed, refused: (h) => refused.push(h) })
            }
            cgroup?.enter(child)
          },
          mode: m,
          context: context(limit._tag === "none" ? undefined : processes)
        }
        return launch
      })

    const service: Service = {
      mode: Effect.sync(() => mode),
      setMode: (m) =>
        Effect.sync(() => {
          mode = m
        }),
      status: Effect.sync(() => ({
        mode,
        active: mode !== "off" && availability.available,
        availability,
        network: allowHosts,
        writable: extraWritable,
        processes,
        launch: reuse && !reuseFailed ? ("long-lived" as const) : ("per-command" as const),
        // said only when the long-lived sandbox was asked for and could not start
        launchReason: reuse ? reuseFailed : undefined
      })),
      prepare,
      explain: (launch, output) => Blocked.explain(output, launch.context)
    }
    options.built?.(service)
    return service
  })

/**
 * Which files the mounts of a plan stand on: device and inode of every path it binds, hides or
 * keeps read-only, and of each folder above it. A mount covers the file that was there when the
 * sandbox was built; one replaced since (a secret or `.git` rewritten by rename, a parent folder
 * swapped) would show uncovered in a long-lived sandbox, so a change here is another sandbox.
 */
const identity = (p: BwrapPlan): string => {
  const seen = new Map<string, string>()
  const id = (f: string) => {
    if (seen.has(f)) return
    try {
      const st = fs.lstatSync(f, { bigint: true })
      seen.set(f, `${st.dev}:${st.ino}`)
    } catch {
      seen.set(f, "-")
    }
    const up = path.dirname(f)
    if (up !== f) id(up)
  }
  for (const f of [...p.writable, ...p.readOnly, ...p.hiddenDirs, ...p.hiddenFiles, ...p.emptiedFiles]) id(f)
  return [...seen].map(([f, i]) => `${f}=${i}`).join("\n")
}

/** A command's cgroup, once its processes are gone (the kernel may take a moment to empty it). */
const removeCgroup = (dir: string, attempt = 0): void => {
  try {
    fs.rmdirSync(dir)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === "EBUSY" && attempt < 20) setTimeout(() => removeCgroup(dir, attempt + 1), 50 * (attempt + 1)).unref()
  }
}

export const layer = (settings: Settings, options: Options = {}): Layer.Layer<Sandbox> =>
  Layer.scoped(Sandbox, make(settings, options))

/** One line for people: the mode and what it means here. */
export const describe = (status: Status): string => {
  if (status.mode === "off") return "sandbox off: commands run with your full rights, guarded by approvals only"
  const a = status.availability
  if (!a.available)
    return `no sandbox: ${a.reason ?? "none available"}. Commands run with your full rights, guarded by approvals only`
  const net = status.network.length === 0 ? "no network" : `network only to ${status.network.join(", ")}`
  const what = status.mode === "workspace-write" ? "writes only the workspace and /tmp" : "read-only (writes only /tmp)"
  const limit =
    a.processLimit._tag === "none"
      ? `no process limit (${a.processLimit.reason})`
      : `at most ${status.processes} processes`
  return `sandbox ${status.mode} (${a.backend}): ${what}, ${net}, secrets hidden, ${limit}${
    a.unixSocketsBlocked ? ", no unix sockets" : ""
  }${status.launchReason ? `; a new sandbox for each command (${status.launchReason})` : status.launch === "long-lived" ? "; one long-lived sandbox per workspace" : ""}`
}
