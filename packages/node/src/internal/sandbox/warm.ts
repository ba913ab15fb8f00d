/**
 * A long-lived sandbox: one `bwrap` started once, running a small supervisor (`SUPERVISOR`, run by
 * node inside it) that starts each command in the namespaces, mounts, seccomp filter and process
 * limit already built, so a command costs a fork and an exec instead of a new sandbox.
 *
 * The host writes requests to the supervisor's stdin, one JSON object a line:
 * `{"t":"run","id":1,"argv":[…],"cwd":"…","env":{…}}`, `{"t":"kill","id":1}` (SIGKILL to the
 * command's process group), `{"t":"drop","id":1}` (stop reading its output). The supervisor answers
 * on its stdout in frames of `[type u8][id u32][length u32][bytes]`: 1 stdout, 2 stderr, 3 exit
 * (`{"code","signal"}`; a program that cannot run says why on stderr, `muse-sandbox: cannot run
 * <program>: ENOENT`, and exits 127), 4 closed (both outputs ended), 5 ready. Each command runs in
 * a process group and a PID namespace of its own (a nested `bwrap`, `nestArgs`) with stdin from
 * /dev/null: it cannot see, signal or trace the supervisor or another command, and what it leaves
 * running ends with it. That launcher starts with a fixed environment in `/` (the command gets its
 * own through `--setenv`/`--chdir`), and one is kept started ahead of the next command (a "spare": a
 * `bash` shim that reads the command's folder, environment and argv, then `env -i` execs it), so a
 * command costs a write and an exec; without a spare (none yet, it died, no `bash`) the launcher is
 * started for the command. The supervisor says it is ready only once such a launch works here. With a proxy descriptor (see `proxy.ts`) the
 * supervisor also runs the network forwarder once and points every command's `HTTP(S)_PROXY` at it.
 *
 * @example
 * ```ts
 * const nest = nestArgs("/usr/bin/bwrap", false)
 * const warm = await start({ file: "bwrap", args: [...bwrapArgs(plan), "--", node, ...supervisorArgs({ nest })], … })
 * const child = warm.run({ argv: ["sh", "-c", "git status"], cwd: root, env })
 * child.on("exit", (code, signal) => …)
 * ```
 */
import { type ChildProcess, spawn } from "node:child_process"
import { EventEmitter } from "node:events"
import { PassThrough } from "node:stream"
import type { Launch } from "../../Sandbox.js"
import { FORWARD } from "./proxy.js"

/** The largest frame a supervisor sends (its output comes in pipe-sized chunks). */
const MAX_FRAME = 16 * 1024 * 1024

/** An exit frame's status, or `undefined` when it is not one. */
const exitOf = (
  data: Uint8Array
): { readonly code?: number | null; readonly signal?: string | null; readonly error?: string } | undefined => {
  try {
    const r: unknown = JSON.parse(Buffer.from(data).toString("utf8"))
    if (typeof r !== "object" || r === null) return undefined
    const { code, signal, error } = r as Record<string, unknown>
    if (code !== undefined && code !== null && !Number.isInteger(code)) return undefined
    if (signal !== undefined && signal !== null && typeof signal !== "string") return undefined
    if (error !== undefined && typeof error !== "string") return undefined
    return r as { code?: number | null; signal?: string | null; error?: string }
  } catch {
    return undefined
  }
}

/**
 * What the supervisor is told at start (`node -e SUPERVISOR <json>`): the proxy channel's
 * descriptor, and the launcher that gives each command a PID namespace of its own (see `nestArgs`).
 */
export interface SupervisorConfig {
  readonly proxy?: number | undefined
  readonly nest: ReadonlyArray<string>
  /** Keep one nested launch ready ahead of the next command (the default). */
  readonly spare?: boolean | undefined
}

/** The arguments after node's path that start the supervisor. */
export const supervisorArgs = (config: SupervisorConfig): Array<string> => ["-e", SUPERVISOR, JSON.stringify(config)]

/**
 * The nested `bwrap` each command starts through inside the long-lived sandbox: a new PID namespace
 * with its own `/proc` over the same mounts, no capabilities, ended with the supervisor. As root
 * (no user namespace) the supervisor keeps `CAP_SYS_ADMIN` for this launch alone; otherwise a
 * nested user namespace provides it.
 */
export const nestArgs = (bwrap: string, root: boolean): Array<string> => [
  bwrap,
  "--dev-bind",
  "/",
  "/",
  "--proc",
  "/proc",
  "--unshare-pid",
  "--unshare-ipc",
  ...(root ? [] : ["--unshare-user"]),
  "--cap-drop",
  "ALL",
  "--die-with-parent"
]

/** The program the sandbox runs with node (`node -e SUPERVISOR <json config>`). */
export const SUPERVISOR = String.raw`"use strict"
${FORWARD}
const net = require("net"), fs = require("fs"), { spawn } = require("child_process")
const out = new net.Socket({ fd: 1, readable: false, writable: true })
const send = (t, id, d) => { const h = Buffer.alloc(9); h.writeUInt8(t, 0); h.writeUInt32BE(id, 1); h.writeUInt32BE(d ? d.length : 0, 5); out.write(d ? Buffer.concat([h, d]) : h) }
const json = (o) => Buffer.from(JSON.stringify(o))
const kids = new Map()
const config = JSON.parse(process.argv[1] || "{}"), nest = config.nest || []
let proxyEnv = {}
// the launcher (which keeps CAP_SYS_ADMIN as root) starts with this environment and in /: nothing a
// command left behind (a relative LD_PRELOAD, a library in its folder) is loaded by it
const LAUNCH = { PATH: "/usr/bin:/bin", LC_ALL: "C" }
const exe = (names) => names.find((f) => { try { fs.accessSync(f, fs.constants.X_OK); return true } catch { return false } })
const BASH = exe(["/bin/bash", "/usr/bin/bash"]), ENV = exe(["/usr/bin/env", "/bin/env"])
// the spare launch's shim: a line on descriptor 3 says go; then the command's folder, environment
// (ended by an empty field) and argv, each NUL-terminated, from descriptor 4 (a file of no name the
// supervisor wrote: read a buffer at a time, where a pipe is read a byte at a time); then exactly
// that environment, in that folder
const SHIM = [
  'read -r _ <&3 || exit 125; exec 3<&-; IFS= read -r -d "" d <&4 || exit 125; e=(); PATH=/bin:/usr/bin',
  'while IFS= read -r -d "" x <&4 && [ -n "$x" ]; do e+=("$x"); [ "\${x%%=*}" = PATH ] && PATH=\${x#PATH=}; done',
  'a=(); while IFS= read -r -d "" x <&4; do a+=("$x"); done; exec 4<&-',
  'no() { printf "muse-sandbox: cannot run %s: %s\\n" "$a" "$1" >&2; exit 127; }',
  'cd -P -- "$d" 2>/dev/null || no "ENOENT (no folder $d)"; type -P -- "$a" >/dev/null || no ENOENT',
  'exec ' + (ENV || "env") + ' -i -- "\${e[@]}" "\${a[@]}"'
].join("\n")
// an open file with no name in the sandbox's /tmp (O_TMPFILE): nothing else can open it
const TMPFILE = 0o20000000 | fs.constants.O_DIRECTORY | fs.constants.O_RDWR
const close = (fd) => { try { fs.closeSync(fd) } catch {} }
// each command in a PID namespace of its own (and a fresh /proc): it cannot see or signal the
// supervisor or another command, and whatever it leaves running dies with it
const nested = (m, env) => nest.length === 0 ? m.argv : [...nest, "--clearenv", ...Object.entries(env).flatMap(([k, v]) => ["--setenv", k, String(v)]), "--chdir", m.cwd, "--", ...m.argv]
// one nested launch kept ready ahead of the next command (its namespaces and /proc built): the
// command then costs a write and an exec
let spare, refill
const fill = () => {
  clearTimeout(refill)
  if (spare || !ready || config.spare === false || nest.length === 0 || !BASH || !ENV) return
  let c, spec
  try { spec = fs.openSync("/tmp", TMPFILE, 0o600) } catch { return }
  try { c = spawn(nest[0], [...nest.slice(1), "--chdir", "/", "--", BASH, "-c", SHIM], { cwd: "/", env: LAUNCH, detached: true, stdio: ["ignore", "pipe", "pipe", "pipe", spec] }) }
  catch { close(spec); return }
  const s = { child: c, spec }
  for (const st of [c.stdio[1], c.stdio[2], c.stdio[3]]) st.on("error", () => {})
  const gone = () => { if (spare === s) spare = undefined; if (s.spec !== undefined) close(s.spec); s.spec = undefined }
  c.on("error", gone)
  c.on("exit", gone)
  spare = s
}
// what the shim can carry: no NUL anywhere, no "=" in a program name or a variable's name
const fits = (argv, env) => argv.length > 0 && !argv[0].includes("=") && argv.every((a) => typeof a === "string" && !a.includes("\0")) &&
  Object.entries(env).every(([k, v]) => k !== "" && !k.includes("=") && !k.includes("\0") && !String(v).includes("\0"))
const takeSpare = (m, env) => {
  const s = spare
  if (!s || s.child.exitCode !== null || s.child.signalCode !== null || !fits(m.argv, env) || typeof m.cwd !== "string" || m.cwd.includes("\0")) return undefined
  spare = undefined
  const z = (x) => x + "\0"
  const spec = Buffer.from(z(m.cwd) + Object.entries(env).map(([k, v]) => z(k + "=" + v)).join("") + z("") + m.argv.map(z).join(""))
  try { if (fs.writeSync(s.spec, spec, 0, spec.length, 0) !== spec.length) throw new Error("short write") }
  catch { try { process.kill(-s.child.pid, "SIGKILL") } catch {}; return undefined }
  finally { close(s.spec); s.spec = undefined }
  s.child.stdio[3].end("go\n")
  // the next one once this command is done (not alongside it, where it would slow it down), or
  // after a second when it runs long
  refill = setTimeout(fill, 1000)
  return s.child
}
const start = (m) => {
  let child
  const env = Object.assign({}, m.env, proxyEnv)
  if (proxyEnv.HTTP_PROXY) { delete env.NO_PROXY; delete env.no_proxy }
  const cannot = (e) => { send(2, m.id, Buffer.from("muse-sandbox: cannot run " + m.argv[0] + ": " + (e.code || e.message) + "\n")); send(3, m.id, json({ code: 127, signal: null })) }
  child = takeSpare(m, env)
  if (!child) {
    const argv = nested(m, env)
    try { child = nest.length === 0 ? spawn(argv[0], argv.slice(1), { cwd: m.cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] }) : spawn(argv[0], argv.slice(1), { cwd: "/", env: LAUNCH, detached: true, stdio: ["ignore", "pipe", "pipe"] }) }
    catch (e) { cannot(e); send(4, m.id); return }
  }
  const k = { child, done: false, exited: false }
  kids.set(m.id, k)
  let open = 2
  const finished = () => { if (k.done && k.exited) setImmediate(fill) }
  const ended = () => { if (--open === 0 && !k.done) { k.done = true; if (k.exited) kids.delete(m.id); send(4, m.id); finished() } }
  for (const [s, t] of [[child.stdout, 1], [child.stderr, 2]]) {
    s.on("data", (d) => { if (!k.done) send(t, m.id, d) }); s.on("end", ended); s.on("error", () => {})
  }
  child.on("error", (e) => { if (k.exited) return; k.exited = true; if (k.done) kids.delete(m.id); cannot(e); finished() })
  child.on("exit", (code, signal) => { if (k.exited) return; k.exited = true; if (k.done) kids.delete(m.id); send(3, m.id, json({ code, signal })); finished() })
}
const handle = (m) => {
  const k = kids.get(m.id)
  if (m.t === "run") start(m)
  else if (m.t === "kill") { if (k && k.child.pid) try { process.kill(-k.child.pid, "SIGKILL") } catch {} }
  else if (m.t === "drop" && k) { k.done = true; if (k.exited) kids.delete(m.id); k.child.stdout.destroy(); k.child.stderr.destroy() }
}
let buf = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (c) => { buf += c; let i; while ((i = buf.indexOf("\n")) >= 0) { const line = buf.slice(0, i); buf = buf.slice(i + 1); try { handle(JSON.parse(line)) } catch (e) { process.stderr.write("supervisor: " + e.message + "\n") } } })
process.stdin.on("end", () => process.exit(0))
// ready once a command can be started as every command will be: a machine that cannot nest the
// namespaces gets no long-lived sandbox (the host gives each command a sandbox of its own)
const probe = (then) => {
  if (nest.length === 0) return then()
  const p = spawn(nest[0], [...nest.slice(1), "--chdir", "/", "--", "true"], { cwd: "/", env: LAUNCH, stdio: ["ignore", "ignore", "pipe"] })
  let said = ""
  p.stderr.on("data", (d) => { said += d })
  p.on("error", (e) => { process.stderr.write("commands cannot get a PID namespace of their own here: " + e.message + "\n"); process.exit(1) })
  p.on("exit", (code) => {
    if (code === 0) return then()
    process.stderr.write("commands cannot get a PID namespace of their own here: " + (said.trim().split("\n").pop() || "exit " + code) + "\n")
    process.exit(1)
  })
}
// with a proxy channel, every command's HTTP(S)_PROXY names the forwarder, started once here
let ready = false
const go = () => { send(5, 0); ready = true; setImmediate(fill) }
probe(() => {
  if (config.proxy === undefined) go()
  else forward(config.proxy, (url) => { proxyEnv = proxyEnvFor(url); go() })
})
`

/** A command run by the supervisor: the parts of a `ChildProcess` that running a command needs. */
export interface WarmChild extends EventEmitter {
  readonly stdout: PassThrough
  readonly stderr: PassThrough
  /** SIGKILL to the command's process group (inside the sandbox). */
  readonly killGroup: () => void
}

/** How the supervisor's `bwrap` is spawned: as a sandboxed command is (see `Sandbox.Launch`). */
export interface StartOptions extends Pick<Launch, "file" | "args" | "env" | "stdio" | "started"> {
  /** Once the supervisor has ended (its cgroup can go). */
  readonly ended?: (() => void) | undefined
  /** How long to wait for the supervisor to say it is ready. */
  readonly timeoutMs?: number | undefined
}

export interface Warm {
  /** Run a command; output and exit come as from a child process. */
  readonly run: (request: {
    readonly argv: ReadonlyArray<string>
    readonly cwd: string
    readonly env: NodeJS.ProcessEnv
  }) => WarmChild
  /** Commands running now. */
  readonly running: () => number
  /** The supervisor still runs and takes new commands (not stopped, not retiring). */
  readonly alive: () => boolean
  /** End the supervisor and with it the sandbox and every command in it. */
  readonly stop: () => void
  /** End it once the commands running now have ended (at once when none runs). */
  readonly retire: () => void
  /**
   * Count a command about to run as one of its users (a retired sandbox waits for it); the function
   * returned gives that back (once; `run` has its own count).
   */
  readonly hold: () => () => void
}

interface Entry {
  readonly child: WarmChild
  exited: boolean
  closed: boolean
}

/**
 * Start a supervisor; resolves once it is ready, or fails with what it said (a machine where the
 * long-lived sandbox cannot start falls back to a sandbox per command).
 */
export const start = (options: StartOptions): Promise<Warm> =>
  new Promise((resolve, reject) => {
    let proc: ChildProcess
    try {
      proc = spawn(options.file, [...options.args], {
        env: options.env,
        cwd: "/",
        // its own process group: Ctrl-C in the terminal is muse's to handle, not the sandbox's
        detached: true,
        stdio: ["pipe", "pipe", "pipe", ...options.stdio]
      })
    } catch (e) {
      reject(e instanceof Error ? e : new Error(String(e)))
      return
    }
    for (const stream of proc.stdio) (stream as NodeJS.EventEmitter | null)?.on("error", () => {})
    proc.on("error", () => {})
    if (proc.pid !== undefined) options.started(proc)
    const entries = new Map<number, Entry>()
    let retiring = false
    let stopped = false
    let held = 0
    const idle = () => entries.size === 0 && held === 0
    const forget = (id: number) => {
      entries.delete(id)
      if (retiring && idle()) warm.stop()
    }
    let next = 1
    let ready = false
    let dead: string | undefined
    let said = ""
    proc.stderr!.on("data", (d: Buffer) => {
      said = (said + d.toString("utf8")).slice(-2000)
    })
    const timer = setTimeout(() => {
      if (ready) return
      fail(`it did not start within ${options.timeoutMs ?? 10_000} ms`)
      try {
        if (proc.pid !== undefined) process.kill(-proc.pid, "SIGKILL")
      } catch {}
    }, options.timeoutMs ?? 10_000)
    const fail = (why: string) => {
      if (dead) return
      dead = why
      clearTimeout(timer)
      if (!ready) {
        reject(new Error(`the sandbox could not start: ${why}`))
        return
      }
      for (const [id, e] of entries) {
        entries.delete(id)
        if (!e.closed)
          e.child.stderr.write(
            `\n[the sandbox this command ran in ended (${why}) and took the command with it; the next command starts a new sandbox]\n`
          )
        if (!e.exited) e.child.emit("exit", null, "SIGKILL")
        if (!e.closed) {
          e.child.stdout.end()
          e.child.stderr.end()
        }
      }
    }
    /** Ends a supervisor whose channel cannot be trusted: its commands end with the reason. */
    const stop = (why: string) => {
      fail(why)
      try {
        if (proc.pid !== undefined) process.kill(-proc.pid, "SIGKILL")
      } catch {}
    }
    proc.on("exit", (code, signal) => {
      options.ended?.()
      // what it said last comes on stderr, which may still be on its way when the exit is seen
      const sayWhy = () => {
        const last = said.trim().split("\n").pop()
        fail(`${signal ? `killed by ${signal}` : `exit ${code}`}${last ? `: ${last}` : ""}`)
      }
      if (proc.stderr!.readableEnded) return sayWhy()
      const cap = setTimeout(sayWhy, 500)
      proc.stderr!.once("end", () => {
        clearTimeout(cap)
        sayWhy()
      })
    })
    let buf: Buffer = Buffer.alloc(0)
    proc.stdout!.on("data", (chunk: Buffer) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk])
      while (buf.length >= 9 && !dead) {
        const n = buf.readUInt32BE(5)
        const type = buf[0]!
        // a frame no supervisor sends: the channel cannot be trusted any more, so the sandbox ends
        if (type < 1 || type > 5 || n > MAX_FRAME) {
          stop(`it sent an unreadable frame (type ${type}, ${n} bytes)`)
          return
        }
        if (buf.length < 9 + n) break
        const id = buf.readUInt32BE(1)
        const data = buf.subarray(9, 9 + n)
        buf = buf.subarray(9 + n)
        if (type === 5) {
          ready = true
          clearTimeout(timer)
          unref()
          resolve(warm)
          continue
        }
        const e = entries.get(id)
        if (!e) continue
        if (type === 1) e.child.stdout.write(Buffer.from(data))
        else if (type === 2) e.child.stderr.write(Buffer.from(data))
        else if (type === 3) {
          const r = exitOf(data)
          if (r === undefined) {
            stop("it sent an unreadable exit status")
            return
          }
          e.exited = true
          if (e.closed) forget(id)
          if (r.error !== undefined) e.child.emit("error", new Error(r.error))
          else e.child.emit("exit", r.code ?? null, r.signal ?? null)
        } else if (type === 4) {
          e.closed = true
          if (e.exited) forget(id)
          e.child.stdout.end()
          e.child.stderr.end()
        }
      }
    })
    /** An idle supervisor does not keep muse running; a running command keeps it by its own timers. */
    const unref = () => {
      proc.unref()
      for (const s of [proc.stdin, proc.stdout, proc.stderr])
        (s as unknown as { _handle?: { unref?: () => void } } | null)?._handle?.unref?.()
    }
    const send = (m: object) => {
      if (dead) return
      proc.stdin!.write(`${JSON.stringify(m)}\n`)
    }
    const warm: Warm = {
      run: (request) => {
        const id = next++
        const child = Object.assign(new EventEmitter(), {
          stdout: new PassThrough(),
          stderr: new PassThrough(),
          killGroup: () => send({ t: "kill", id })
        }) as WarmChild
        // the output as a child process gives it: "close" once it exited and both outputs closed
        let open = 2
        let exited = false
        const closed = () => {
          if (--open === 0) {
            const e = entries.get(id)
            if (e && !e.closed) {
              e.closed = true
              send({ t: "drop", id })
              if (e.exited) forget(id)
            }
            if (exited) child.emit("close")
            else child.once("exit", () => child.emit("close"))
          }
        }
        child.stdout.on("close", closed)
        child.stderr.on("close", closed)
        child.once("exit", () => {
          exited = true
        })
        child.once("error", () => {
          exited = true
        })
        if (dead) {
          setImmediate(() => {
            child.emit("error", new Error(`the sandbox ended (${dead}); run the command again`))
            child.stdout.end()
            child.stderr.end()
          })
          return child
        }
        entries.set(id, { child, exited: false, closed: false })
        send({ t: "run", id, argv: request.argv, cwd: request.cwd, env: request.env })
        return child
      },
      running: () => entries.size,
      retire: () => {
        retiring = true
        if (idle()) warm.stop()
      },
      hold: () => {
        held++
        let given = false
        return () => {
          if (given) return
          given = true
          held--
          if (retiring && idle()) warm.stop()
        }
      },
      alive: () => dead === undefined && !retiring && !stopped,
      stop: () => {
        stopped = true
        try {
          if (proc.pid !== undefined) process.kill(-proc.pid, "SIGKILL")
        } catch {}
      }
    }
  })
