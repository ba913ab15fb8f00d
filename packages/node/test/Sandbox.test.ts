/**
 * The escape corpus: commands that try to get out of the OS sandbox through `run_shell`, run with
 * the real sandbox of this machine (bubblewrap on Linux). In `workspace-write` none of them may
 * change or read what they try to, and each refusal must say "blocked by the sandbox" and what.
 * On a machine where no sandbox can run, the fallback is what is tested: commands run, and the
 * status says why there is no sandbox.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Tools } from "@musekit/core"
import { Effect, Fiber, type Scope } from "effect"
import { CodingTools, Sandbox, WorkspaceNode } from "../src/index.js"
import * as Warm from "../src/internal/sandbox/warm.js"

const detected = Sandbox.detect()
const available = detected.available
// a machine where no sandbox can run says why (the escape corpus is skipped there)
if (!available) console.warn(`Sandbox tests skipped: ${detected.reason}`)
const processLimit = detected.processLimit
if (available && processLimit._tag === "none") console.warn(`no process limit here: ${processLimit.reason}`)
const real = (p: string) => fs.realpathSync(p)
/**
 * Test folders live outside /tmp: a sandboxed command gets a private /tmp, so a folder under the
 * host's /tmp is out of sight anyway and would not show what the sandbox refuses.
 */
const base = real(fs.mkdtempSync(path.join(fs.existsSync("/var/tmp") ? "/var/tmp" : os.homedir(), "muse-sbx-test-")))
afterAll(() => fs.rmSync(base, { recursive: true, force: true }))
const tmp = (prefix: string) => real(fs.mkdtempSync(path.join(base, prefix)))
const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.email=t@example.invalid", "-c", "user.name=t", ...args], {
    cwd,
    encoding: "utf8"
  })

const findCurl = () =>
  (process.env.PATH ?? "").split(path.delimiter).some((d) => d !== "" && fs.existsSync(path.join(d, "curl")))

const SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- planted-secret-1234"

/** A git repository as the workspace, an outside folder, a temp HOME with planted secrets. */
const world = () => {
  const home = tmp("muse-sbx-home-")
  fs.mkdirSync(path.join(home, ".ssh"), { mode: 0o700 })
  fs.writeFileSync(path.join(home, ".ssh", "id_ed25519"), SECRET, { mode: 0o600 })
  fs.writeFileSync(path.join(home, ".ssh", "id_rsa"), SECRET, { mode: 0o600 })
  fs.mkdirSync(path.join(home, ".aws"))
  fs.writeFileSync(path.join(home, ".aws", "credentials"), SECRET)
  fs.writeFileSync(path.join(home, ".netrc"), SECRET)
  const outside = tmp("muse-sbx-outside-")
  fs.writeFileSync(path.join(outside, "target.txt"), "original\n")
  const root = tmp("muse-sbx-ws-")
  git(root, "init", "-q", "-b", "main")
  fs.writeFileSync(path.join(root, "README.md"), "hello\n")
  git(root, "add", ".")
  git(root, "commit", "-q", "-m", "init")
  return { home, outside, root }
}

const runner = (
  sandbox: Sandbox.Service | undefined,
  root: string
): Effect.Effect<
  (params: { command: string; timeout_ms?: number; unsandboxed?: boolean }) => Effect.Effect<CodingTools.ShellResult>,
  never
> =>
  Effect.gen(function* () {
    const workspace = yield* Effect.orDie(WorkspaceNode.make(root))
    const ctx: Tools.CallContext = { agent: "main", callId: "c", workspace, progress: () => Effect.void }
    const def = CodingTools.runShell(sandbox ? { sandbox } : {})
    return (params) => Effect.orDie(Effect.flatMap(Tools.decodeParams(def, params), (p) => def.handler(p, ctx)))
  })

/** Which launch the escape corpus runs through (it runs through both). */
let corpusReuse = false

const sandboxed = (
  home: string,
  settings: Sandbox.Settings = { mode: "workspace-write" }
): Effect.Effect<Sandbox.Service, never, Scope.Scope> => Sandbox.make({ reuse: corpusReuse, ...settings }, { home })

/** The refusal the model and the user see. */
const refusal = (r: CodingTools.ShellResult) => {
  expect(r.exit_code).not.toBe(0)
  expect(r.note ?? "").toContain("blocked by the sandbox: ")
  return (r.sandbox?.blocked ?? []).join("\n")
}

const waitUntil = (check: () => boolean, timeoutMs: number) =>
  Effect.gen(function* () {
    const end = Date.now() + timeoutMs
    while (!check() && Date.now() < end) yield* Effect.sleep("20 millis")
    return check()
  })

/** This process's long-lived sandbox supervisors: node processes it started, run as `node -e <supervisor>`. */
const supervisors = (): Array<number> => {
  const parent = new Map<number, number>()
  const argv = new Map<number, Array<string>>()
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8")
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]))
      argv.set(Number(name), fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0"))
    } catch {}
  }
  const mine = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (p === process.pid) return true
    return false
  }
  return [...argv]
    .filter(([pid, a]) => a[0] === process.execPath && a[1] === "-e" && a[2]?.includes("use strict") && mine(pid))
    .map(([pid]) => pid)
}

/** A process's parent, or -1 once it is gone. */
const parentOf = (pid: number): number => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
  } catch {
    return -1
  }
}

/** The supervisor of this process that a command matching `is` (its argv) runs under, if one does. */
const supervisorOf = (is: (argv: ReadonlyArray<string>) => boolean): number | undefined => {
  const sups = new Set(supervisors())
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (!is(fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0"))) continue
    } catch {
      continue
    }
    for (let p = parentOf(Number(name)); p > 1; p = parentOf(p)) if (sups.has(p)) return p
  }
  return undefined
}

describe.skipIf(!available).each([
  { launch: "a sandbox per command", reuse: false },
  { launch: "the long-lived sandbox", reuse: true }
])("Sandbox: the escape corpus through run_shell (workspace-write, $launch)", ({ reuse }) => {
  beforeAll(() => {
    corpusReuse = reuse
  })
  afterAll(() => {
    corpusReuse = false
  })
  it.scoped("runs ordinary work: writes in the workspace and /tmp, reads the machine, git works", () =>
    Effect.gen(function* () {
      const w = world()
      const run = yield* runner(yield* sandboxed(w.home), w.root)
      const r = yield* run({
        command:
          "echo made > made.txt && mkdir -p sub && echo x > /tmp/t && cat /tmp/t && cat /etc/hostname >/dev/null && git status --short && echo $MUSE_SANDBOX"
      })
      expect(r).toMatchObject({ exit_code: 0, timed_out: false })
      expect(r.output).toContain("?? made.txt")
      expect(r.output).toContain("workspace-write")
      expect(fs.readFileSync(path.join(w.root, "made.txt"), "utf8")).toBe("made\n")
      expect(r.sandbox).toBeUndefined()
    })
  )

  it.scoped("a write outside the workspace is refused and named", () =>
    Effect.gen(function* () {
      const w = world()
      const run = yield* runner(yield* sandboxed(w.home), w.root)
      const r = yield* run({ command: `echo pwned > ${w.outside}/escape.txt` })
      expect(fs.existsSync(path.join(w.outside, "escape.txt"))).toBe(false)
      expect(refusal(r)).toContain(`write to ${w.outside}/escape.txt: outside the writable folders (${w.root}, /tmp)`)
      const home = yield* run({ command: `echo pwned >> ${w.home}/.bashrc` })
      expect(fs.existsSync(path.join(w.home, ".bashrc"))).toBe(false)
      expect(refusal(home)).toContain(`write to ${w.home}/.bashrc`)
    })
  )

  it.scoped("a symlink made inside does not lead out: writes through it and reads of secrets fail", () =>
    Effect.gen(function* () {
      const w = world()
      const run = yield* runner(yield* sandboxed(w.home), w.root)
      const write = yield* run({ command: `ln -s ${w.outside} out && echo pwned > out/escape.txt` })
      expect(fs.existsSync(path.join(w.outside, "escape.txt"))).toBe(false)
      expect(refusal(write)).toContain(`(a link to ${w.outside}/escape.txt): outside the writable folders`)
      const overwrite = yield* run({ command: `ln -s ${w.outside}/target.txt t && echo pwned > t` })
      expect(fs.readFileSync(path.join(w.outside, "target.txt"), "utf8")).toBe("original\n")
      expect(refusal(overwrite)).toContain("outside the writable folders")
      const read = yield* run({ command: `ln -s ${w.home}/.ssh/id_ed25519 key && cat key` })
      expect(read.output).not.toContain("planted-secret")
      expect(read.exit_code).not.toBe(0)
    })
  )

  it.scoped("a hard link made inside cannot reach a file outside", () =>
    Effect.gen(function* () {
      const w = world()
      const run = yield* runner(yield* sandboxed(w.home), w.root)
      const r = yield* run({ command: `ln ${w.outside}/target.txt hl && echo pwned > hl` })
      expect(fs.readFileSync(path.join(w.outside, "target.txt"), "utf8")).toBe("original\n")
      expect(fs.statSync(path.join(w.outside, "target.txt")).nlink).toBe(1)
      expect(refusal(r)).toContain("hard link")
      expect(refusal(r)).toContain("across the sandbox's edge")
      const secret = yield* run({ command: `ln ${w.home}/.ssh/id_rsa k; cat k` })
      expect(secret.output).not.toContain("planted-secret")
    })
  )

  it.scoped("planted ~/.ssh/id_*, ~/.aws and ~/.netrc under HOME are unreadable", () =>
    Effect.gen(function* () {
      const w = world()
      const run = yield* runner(yield* sandboxed(w.home), w.root)
      for (const command of [
        `cat ${w.home}/.ssh/id_ed25519`,
        `cat ${w.home}/.ssh/id_*`,
        `ls -la ${w.home}/.ssh`,
        `cat ${w.home}/.aws/credentials`,
        `cat ${w.home}/.netrc`,
        `grep -r planted ${w.home}`,
        `tar cf - ${w.home} 2>&1 | strings`
      ]) {
        const r = yield* run({ command })
        expect(r.output, command).not.toContain("planted-secret")
        expect(r.output, command).not.toContain("id_ed25519\n")
      }
      const r = yield* run({ command: `cat ${w.home}/.ssh/id_ed25519` })
      expect(refusal(r)).toContain(`read of ${w.home}/.ssh/id_ed25519: ${w.home}/.ssh is hidden by the sandbox`)
      const netrc = yield* run({ command: `cat ${w.home}/.netrc` })
      expect(refusal(netrc)).toContain(`read of ${w.home}/.netrc: ${w.home}/.netrc is hidden by the sandbox`)
    })
  )

  it.scoped(".git/config and .git/hooks stay read-only (and .muse)", () =>
    Effect.gen(function* () {
      const w = world()
      fs.mkdirSync(path.join(w.root, ".muse"))
      const config = fs.readFileSync(path.join(w.root, ".git", "config"), "utf8")
      const run = yield* runner(yield* sandboxed(w.home), w.root)
      const c = yield* run({ command: "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config" })
      expect(fs.readFileSync(path.join(w.root, ".git", "config"), "utf8")).toBe(config)
      expect(refusal(c)).toContain(`write to ${w.root}/.git/config: .git stays read-only in the sandbox`)
      const cfg = yield* run({ command: "git config core.hooksPath /tmp" })
      expect(fs.readFileSync(path.join(w.root, ".git", "config"), "utf8")).toBe(config)
      expect(cfg.exit_code).not.toBe(0)
      const h = yield* run({
        command: "echo 'touch /tmp/pwned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"
      })
      expect(fs.existsSync(path.join(w.root, ".git", "hooks", "pre-commit"))).toBe(false)
      expect(refusal(h)).toContain(`write to ${w.root}/.git/hooks/pre-commit: .git stays read-only in the sandbox`)
      const m = yield* run({ command: "echo '{}' > .muse/config.json" })
      expect(fs.existsSync(path.join(w.root, ".muse", "config.json"))).toBe(false)
      expect(refusal(m)).toContain(".muse stays read-only in the sandbox")
      // moving the protected folder away is refused too (it is a mount point)
      const mv = yield* run({ command: "mv .git .git-old && mkdir .git" })
      expect(mv.exit_code).not.toBe(0)
      expect(fs.existsSync(path.join(w.root, ".git", "config"))).toBe(true)
    })
  )

  it.scoped("a listener on 127.0.0.1 is out of reach (no network)", () =>
    Effect.gen(function* () {
      const w = world()
      let connections = 0
      const server = net.createServer((c) => {
        connections++
        c.on("error", () => {})
        c.end("hello from the host\n")
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.sync(() => server.close())
      )
      const port = (server.address() as net.AddressInfo).port
      const run = yield* runner(yield* sandboxed(w.home), w.root)
      const script = `require('net').connect(${port},'127.0.0.1').on('connect',()=>{console.log('CONNECTED');process.exit(0)}).on('data',d=>console.log(String(d))).on('error',e=>{console.error('error: '+e.message);process.exit(1)})`
      const r = yield* run({ command: `"${process.execPath}" -e "${script}"` })
      expect(r.output).not.toContain("CONNECTED")
      expect(connections).toBe(0)
      expect(refusal(r)).toContain("network access (the sandbox has no network)")
      const outside = yield* run({
        command: `"${process.execPath}" -e "require('dns').lookup('example.com',e=>{console.error(String(e));process.exit(e?1:0)})"`
      })
      expect(outside.exit_code).not.toBe(0)
    })
  )

  // curl honours HTTP_PROXY as most tools do (node's own http does not)
  it.scoped.skipIf(!findCurl())(
    "allowed hosts are reached through the proxy; every other host is refused and named",
    () =>
      Effect.gen(function* () {
        const w = world()
        const hits: Array<string> = []
        const listen = () => {
          const server = net.createServer((c) => {
            c.on("error", () => {})
            c.once("data", (d) => {
              hits.push(String(d).split("\r\n")[0]!)
              c.end("HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nhello\n")
            })
          })
          return Effect.acquireRelease(
            Effect.async<number>(
              (resume) =>
                void server.listen(0, "127.0.0.1", () =>
                  resume(Effect.succeed((server.address() as net.AddressInfo).port))
                )
            ),
            () => Effect.sync(() => server.close())
          )
        }
        const allowedPort = yield* listen()
        const otherPort = yield* listen()
        const sandbox = yield* sandboxed(w.home, {
          mode: "workspace-write",
          network: { allow: [`127.0.0.1:${allowedPort}`] }
        })
        const run = yield* runner(sandbox, w.root)
        const ok = yield* run({ command: `curl -fsS --max-time 10 http://127.0.0.1:${allowedPort}/x` })
        expect(ok).toMatchObject({ exit_code: 0, output: "hello\n" })
        expect(hits).toEqual(["GET /x HTTP/1.1"])
        const no = yield* run({ command: `curl -fsS --max-time 10 http://127.0.0.1:${otherPort}/y` })
        expect(hits).toEqual(["GET /x HTTP/1.1"])
        expect(refusal(no)).toContain(
          `network connection to 127.0.0.1:${otherPort} (not in the sandbox's allowed hosts)`
        )
        // around the proxy there is no way out
        const direct = yield* run({ command: `curl -sS --noproxy '*' --max-time 10 http://127.0.0.1:${allowedPort}/z` })
        expect(direct.output).toContain("Couldn't connect to server")
        expect(refusal(direct)).toContain(`network access (only 127.0.0.1:${allowedPort} through the proxy`)
        expect(hits).toEqual(["GET /x HTTP/1.1"])
      })
  )

  it.live.skipIf(processLimit._tag === "none")("a fork bomb is bounded by the process limit", () =>
    Effect.gen(function* () {
      const w = world()
      const limit = 64
      const sandbox = yield* sandboxed(w.home, { mode: "workspace-write", processes: limit })
      const status = yield* sandbox.status
      expect(status.availability.processLimit._tag).not.toBe("none")
      const run = yield* runner(sandbox, w.root)
      // a bomb of bounded depth (2^11 shells at most even without a limit), started apart from the
      // command's own shell (which waits on a sleep started first); its forks are shells that share
      // the command line, so the host counts them by it
      const nap = `30.${String(Math.random()).slice(2, 8)}`
      const bomb = `sleep 8 & (b(){ if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)); fi; sleep ${nap}; }; b 10 &); wait`
      const seen = { max: 0 }
      const count = () =>
        fs.readdirSync("/proc").filter((pid) => {
          if (!/^\d+$/.test(pid)) return false
          try {
            const line = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
            return line.includes(bomb) || line === `sleep\0${nap}\0`
          } catch {
            return false
          }
        }).length
      const fiber = yield* Effect.fork(run({ command: bomb, timeout_ms: 5000 }))
      const watch = yield* Effect.fork(
        Effect.forever(
          Effect.zipRight(
            Effect.sync(() => (seen.max = Math.max(seen.max, count()))),
            Effect.sleep("25 millis")
          )
        )
      )
      const r = yield* Fiber.join(fiber)
      yield* Fiber.interrupt(watch)
      // the bomb ran (a shell that cannot fork gives up and exits, so the count churns below the limit
      // between samples: the forks refused, named in the note below, show the limit was reached)
      expect(seen.max).toBeGreaterThan(8)
      expect(seen.max).toBeLessThanOrEqual(limit)
      expect(r.timed_out).toBe(true)
      expect(r.note ?? "").toContain(
        `blocked by the sandbox: starting a process beyond the sandbox's limit of ${limit}`
      )
      expect(yield* waitUntil(() => count() === 0, 5000)).toBe(true)
    }).pipe(Effect.scoped)
  )

  it.scoped("a crew worker in its worktree cannot write the main checkout or another member's worktree", () =>
    Effect.gen(function* () {
      const w = world()
      const trees = tmp("muse-sbx-trees-")
      const a = path.join(trees, "a")
      const b = path.join(trees, "b")
      git(w.root, "worktree", "add", "-q", "-b", "crew-a", a)
      git(w.root, "worktree", "add", "-q", "-b", "crew-b", b)
      const sandbox = yield* sandboxed(w.home)
      const runA = yield* runner(sandbox, a)
      const own = yield* runA({ command: "echo mine > mine.txt && git add mine.txt && git status --short" })
      // its own worktree is writable; its git index lives in the main .git, which stays read-only
      expect(fs.readFileSync(path.join(a, "mine.txt"), "utf8")).toBe("mine\n")
      expect(own.exit_code).not.toBe(0)
      const other = yield* runA({ command: `echo pwned > ${b}/README.md` })
      expect(fs.readFileSync(path.join(b, "README.md"), "utf8")).toBe("hello\n")
      expect(refusal(other)).toContain(`write to ${b}/README.md: outside the writable folders (${a}, /tmp)`)
      const main = yield* runA({ command: `echo pwned > ${w.root}/README.md; echo pwned > ../b/x` })
      expect(fs.readFileSync(path.join(w.root, "README.md"), "utf8")).toBe("hello\n")
      expect(fs.existsSync(path.join(b, "x"))).toBe(false)
      expect(refusal(main)).toContain(`write to ${w.root}/README.md`)
      const link = yield* runA({ command: `ln -s ${b} bl && echo pwned > bl/y` })
      expect(fs.existsSync(path.join(b, "y"))).toBe(false)
      expect(refusal(link)).toContain("outside the writable folders")
      // two members at the same time, each with its own writable root and /tmp
      const runB = yield* runner(sandbox, b)
      const [ra, rb] = yield* Effect.all(
        [
          runA({ command: "echo a > /tmp/who && sleep 0.3 && cat /tmp/who" }),
          runB({ command: "echo b > /tmp/who && sleep 0.3 && cat /tmp/who && echo b > mine-b" })
        ],
        { concurrency: 2 }
      )
      expect(ra.output).toBe("a\n")
      expect(rb.output).toBe("b\n")
      expect(fs.existsSync(path.join(b, "mine-b"))).toBe(true)
    })
  )

  it.scoped("a shell found on a PATH folder under /tmp still runs (the sandbox has a /tmp of its own)", () =>
    Effect.gen(function* () {
      const w = world()
      const bin = fs.mkdtempSync(path.join("/tmp", "muse-sbx-path-"))
      fs.symlinkSync("/bin/sh", path.join(bin, "sh"))
      const saved = process.env.PATH
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          // the only shell on the PATH is the one under /tmp
          process.env.PATH = bin
        }),
        () =>
          Effect.sync(() => {
            process.env.PATH = saved
            fs.rmSync(bin, { recursive: true, force: true })
          })
      )
      const run = yield* runner(yield* sandboxed(w.home), w.root)
      expect(yield* run({ command: "echo ran" })).toMatchObject({ exit_code: 0, output: "ran\n" })
      // a sandbox that cannot start the command says so
      const workspace = yield* Effect.orDie(WorkspaceNode.make(w.root))
      const def = CodingTools.runShell({ sandbox: yield* sandboxed(w.home), shell: "/nonexistent/muse-sh" })
      const params = yield* Effect.orDie(Tools.decodeParams(def, { command: "echo ran" }))
      const failed = (yield* Effect.orDie(
        def.handler(params, { agent: "main", callId: "x", workspace, progress: () => Effect.void })
      )) as CodingTools.ShellResult
      // (the long-lived sandbox's supervisor says it, or bubblewrap where each command has its own)
      expect(refusal(failed)).toMatch(
        /the sandbox could not start the command \((bwrap: execvp|muse-sandbox: cannot run) \/nonexistent\/muse-sh/
      )
    })
  )

  it.live("a command interrupted as it starts is stopped cleanly, again and again", () =>
    Effect.gen(function* () {
      const w = world()
      // (a write to the command's pipes can fail as it dies: that must not reach muse as an error)
      const run = yield* runner(yield* sandboxed(w.home), w.root)
      for (let i = 0; i < 40; i++) {
        const fiber = yield* Effect.fork(run({ command: "sleep 5" }))
        yield* Effect.sleep(`${i % 8} millis`)
        yield* Fiber.interrupt(fiber)
      }
      // the sandbox still runs commands
      expect(yield* run({ command: "echo still" })).toMatchObject({ exit_code: 0, output: "still\n" })
    }).pipe(Effect.scoped)
  )

  it.scoped("read-only writes only /tmp; off runs with full rights; unsandboxed runs outside only when allowed", () =>
    Effect.gen(function* () {
      const w = world()
      const sandbox = yield* sandboxed(w.home, { mode: "read-only" })
      const run = yield* runner(sandbox, w.root)
      const ro = yield* run({ command: "echo x > here.txt" })
      expect(fs.existsSync(path.join(w.root, "here.txt"))).toBe(false)
      expect(refusal(ro)).toContain(`write to ${w.root}/here.txt: the sandbox is read-only; only /tmp is writable`)
      expect((yield* run({ command: "echo x > /tmp/x && cat /tmp/x" })).exit_code).toBe(0)
      // asking for unsandboxed without the person's answer still runs inside
      const asked = yield* run({ command: "echo x > here.txt", unsandboxed: true })
      expect(fs.existsSync(path.join(w.root, "here.txt"))).toBe(false)
      expect(asked.note).toContain("ran inside the sandbox: the user did not let it run outside")
      // the person's "run unsandboxed" answer (CallContext.unsandboxed) lets it out, this call only
      const workspace = yield* Effect.orDie(WorkspaceNode.make(w.root))
      const def = CodingTools.runShell({ sandbox })
      const params = yield* Effect.orDie(Tools.decodeParams(def, { command: "echo x > here.txt", unsandboxed: true }))
      const out = (yield* Effect.orDie(
        def.handler(params, { agent: "main", callId: "u", workspace, progress: () => Effect.void, unsandboxed: true })
      )) as CodingTools.ShellResult
      expect(out).toMatchObject({ exit_code: 0, sandbox: { mode: "off" } })
      expect(fs.existsSync(path.join(w.root, "here.txt"))).toBe(true)
      yield* sandbox.setMode("off")
      const off = yield* run({ command: `echo x > ${w.outside}/off.txt` })
      expect(off.exit_code).toBe(0)
      expect(fs.existsSync(path.join(w.outside, "off.txt"))).toBe(true)
      expect(Sandbox.describe(yield* sandbox.status)).toContain("sandbox off")
    })
  )
})

describe.skipIf(!available || process.platform !== "linux")("Sandbox: the long-lived sandbox (Linux)", () => {
  it.scoped("commands share one sandbox: one /tmp, each its own process group, killed on timeout", () =>
    Effect.gen(function* () {
      const w = world()
      const sandbox = yield* sandboxed(w.home, { mode: "workspace-write", reuse: true })
      expect((yield* sandbox.status).launch).toBe("long-lived")
      expect(Sandbox.describe(yield* sandbox.status)).toContain("one long-lived sandbox per workspace")
      const run = yield* runner(sandbox, w.root)
      // the private /tmp lasts from one command to the next of the same workspace
      expect((yield* run({ command: "echo kept > /tmp/kept" })).exit_code).toBe(0)
      expect(yield* run({ command: "cat /tmp/kept" })).toMatchObject({ exit_code: 0, output: "kept\n" })
      // each command is alone in a PID namespace of its own (under the launcher's init, pid 1)
      expect((yield* run({ command: "echo $PPID" })).output).toBe("1\n")
      // a timeout kills the command's whole group, background children too
      const slow = yield* run({ command: "sleep 30 & sleep 30", timeout_ms: 500 })
      expect(slow.timed_out).toBe(true)
      const count = "cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$' || true"
      expect((yield* run({ command: count })).output.trim()).toBe("0")
      // a background process still holding the output ends with the command that started it
      const t = Date.now()
      const held = yield* run({ command: "sleep 30 & echo done" })
      expect(held).toMatchObject({ exit_code: 0, output: "done\n" })
      expect(Date.now() - t).toBeLessThan(20_000)
      expect((yield* run({ command: count })).output.trim()).toBe("0")
      // a mode change (/sandbox) is another sandbox: the running one is not reused for it
      yield* sandbox.setMode("read-only")
      expect(refusal(yield* run({ command: "echo x > ro.txt" }))).toContain("read-only")
      expect(fs.existsSync(path.join(w.root, "ro.txt"))).toBe(false)
      yield* sandbox.setMode("workspace-write")
      expect((yield* run({ command: "echo x > rw.txt" })).exit_code).toBe(0)
      expect(fs.existsSync(path.join(w.root, "rw.txt"))).toBe(true)
    })
  )

  it.scopedLive("a supervisor killed mid-command: that command says so, the next one starts a new sandbox", () =>
    Effect.gen(function* () {
      const w = world()
      const run = yield* runner(yield* sandboxed(w.home, { mode: "workspace-write", reuse: true }), w.root)
      const before = (yield* run({ command: "echo $PPID" })).output
      // SIGKILL the supervisor from outside, as a crash would (a command cannot reach it); output
      // it had not passed on yet is lost with it: "started" is let through first. The supervisor is
      // the one this command runs under (others, of earlier tests, may still be ending meanwhile)
      const fiber = yield* Effect.fork(run({ command: "echo started; sleep 31; echo never" }))
      let ours: number | undefined
      expect(
        yield* waitUntil(() => (ours = supervisorOf((a) => a[0] === "sleep" && a[1] === "31")) !== undefined, 10_000)
      ).toBe(true)
      yield* Effect.sleep("500 millis")
      process.kill(ours!, "SIGKILL")
      const killed = yield* Fiber.join(fiber)
      expect(killed.exit_code).toBe(null)
      expect(killed.output).toContain("started")
      expect(killed.output).not.toContain("never")
      expect(killed.output).toContain("the sandbox this command ran in ended")
      expect(killed.output).toContain("the next command starts a new sandbox")
      const again = yield* run({
        command: "echo again > again.txt; cat again.txt; echo x > /etc/muse-escape 2>&1 || true"
      })
      expect(again.output.split("\n")[0]).toBe("again")
      expect(fs.existsSync("/etc/muse-escape")).toBe(false)
      expect((yield* run({ command: "echo $PPID" })).exit_code).toBe(0)
      // still confined after the restart
      expect(refusal(yield* run({ command: `cat ${w.home}/.ssh/id_ed25519` }))).toContain(".ssh")
      expect(before).toMatch(/^\d+\n$/)
    })
  )

  it.scoped("a supervisor that cannot start: each command gets a sandbox of its own, and the status says why", () =>
    Effect.gen(function* () {
      const w = world()
      // a bwrap that refuses to run the supervisor and runs everything else
      const fake = path.join(tmp("muse-sbx-fakebwrap-"), "bwrap")
      fs.writeFileSync(
        fake,
        `#!/bin/sh\ncase "$*" in *"use strict"*) echo "no supervisor here" >&2; exit 1;; esac\nexec "${detected.program}" "$@"\n`,
        { mode: 0o755 }
      )
      const sandbox = yield* Sandbox.make(
        { mode: "workspace-write", reuse: true },
        { home: w.home, availability: { ...detected, program: fake } }
      )
      const run = yield* runner(sandbox, w.root)
      expect(yield* run({ command: "echo ok > ok.txt && cat ok.txt" })).toMatchObject({ exit_code: 0, output: "ok\n" })
      const status = yield* sandbox.status
      expect(status.launch).toBe("per-command")
      expect(status.launchReason).toContain("no supervisor here")
      expect(Sandbox.describe(status)).toContain("a new sandbox for each command (the sandbox could not start: exit 1")
      expect(refusal(yield* run({ command: `echo x > ${w.outside}/target.txt` }))).toContain(w.outside)
      expect(fs.readFileSync(path.join(w.outside, "target.txt"), "utf8")).toBe("original\n")
    })
  )

  it.scoped("by default the commands of a workspace share a long-lived sandbox", () =>
    Effect.gen(function* () {
      const w = world()
      const sandbox = yield* Sandbox.make({ mode: "workspace-write" }, { home: w.home })
      expect((yield* sandbox.status).launch).toBe("long-lived")
      const run = yield* runner(sandbox, w.root)
      expect(yield* run({ command: "echo ok > ok.txt && cat ok.txt" })).toMatchObject({ exit_code: 0, output: "ok\n" })
      expect((yield* sandbox.status).launch).toBe("long-lived")
    })
  )

  it.scoped("reuse: false gives every command a sandbox of its own", () =>
    Effect.gen(function* () {
      const w = world()
      const sandbox = yield* Sandbox.make({ mode: "workspace-write", reuse: false }, { home: w.home })
      const status = yield* sandbox.status
      expect(status.launch).toBe("per-command")
      expect(status.launchReason).toBeUndefined()
      expect(Sandbox.describe(status)).not.toContain("long-lived")
      const run = yield* runner(sandbox, w.root)
      expect(yield* run({ command: "echo ok > ok.txt && cat ok.txt" })).toMatchObject({ exit_code: 0, output: "ok\n" })
      expect(refusal(yield* run({ command: `echo x > ${w.outside}/target.txt` }))).toContain(w.outside)
      expect(fs.readFileSync(path.join(w.outside, "target.txt"), "utf8")).toBe("original\n")
      expect(refusal(yield* run({ command: `cat ${w.home}/.ssh/id_ed25519` }))).toContain(".ssh")
      // the workspace's private /tmp; a process a command starts in the background ends with the command
      expect((yield* run({ command: "echo t > /tmp/t && cat /tmp/t" })).output).toBe("t\n")
      yield* run({ command: "(sleep 1; echo late > late.txt) >/dev/null 2>&1 &" })
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 1500)))
      expect(fs.existsSync(path.join(w.root, "late.txt"))).toBe(false)
    })
  )
})

describe.skipIf(!available || process.platform !== "linux").each([
  { launch: "a sandbox per command", reuse: false },
  { launch: "the long-lived sandbox", reuse: true }
])("Sandbox: commands kept apart ($launch)", ({ reuse }) => {
  it.scoped("a background process ends with the command that started it (`&`, `setsid`)", () =>
    Effect.gen(function* () {
      const w = world()
      const run = yield* runner(yield* Sandbox.make({ mode: "workspace-write", reuse }, { home: w.home }), w.root)
      const started = yield* run({
        command:
          "(sleep 1; echo late > late.txt) >/dev/null 2>&1 & setsid sh -c 'sleep 1; echo late > setsid.txt' >/dev/null 2>&1 & echo started"
      })
      expect(started).toMatchObject({ exit_code: 0, output: "started\n" })
      // a later command of the workspace does not keep them alive either
      expect((yield* run({ command: "sleep 2; echo next" })).output).toBe("next\n")
      expect(fs.existsSync(path.join(w.root, "late.txt"))).toBe(false)
      expect(fs.existsSync(path.join(w.root, "setsid.txt"))).toBe(false)
    })
  )

  it.scoped("a command cannot see, signal or read the supervisor or another command", () =>
    Effect.gen(function* () {
      const w = world()
      const sandbox = yield* Sandbox.make({ mode: "workspace-write", reuse }, { home: w.home })
      const run = yield* runner(sandbox, w.root)
      expect((yield* run({ command: "echo kept > /tmp/kept" })).exit_code).toBe(0)
      // another command runs while this one looks for it and for the supervisor, then kills all it can
      const other = yield* Effect.fork(run({ command: "echo other-started; sleep 4.123; echo other-finished" }))
      const look = [
        "sleep 1",
        `for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done > seen.txt 2>/dev/null`,
        "ls /proc | grep -c '^[0-9]' > pids.txt",
        "kill -9 -1 2>/dev/null",
        "echo looked"
      ].join("; ")
      const looked = yield* run({ command: look })
      const seen = fs.readFileSync(path.join(w.root, "seen.txt"), "utf8")
      expect(seen).not.toContain("4.123")
      expect(seen).not.toContain("use strict")
      // its own shell, the launcher's init and what it ran: a handful, not the machine's
      expect(Number(fs.readFileSync(path.join(w.root, "pids.txt"), "utf8"))).toBeLessThan(8)
      expect(looked.output).toContain("looked")
      const finished = yield* Fiber.join(other)
      expect(finished).toMatchObject({ exit_code: 0, output: "other-started\nother-finished\n" })
      // the workspace's sandbox still runs, the same one where it is long-lived
      const after = yield* run({ command: "cat /tmp/kept" })
      expect(after).toMatchObject({ exit_code: 0, output: "kept\n" })
      if (reuse) expect((yield* sandbox.status).launch).toBe("long-lived")
    })
  )

  it.scoped("a command holds no capability, not even one to regain on exec", () =>
    Effect.gen(function* () {
      const w = world()
      const run = yield* runner(yield* Sandbox.make({ mode: "workspace-write", reuse }, { home: w.home }), w.root)
      const caps = yield* run({ command: "grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status" })
      expect(caps.exit_code).toBe(0)
      const lines = caps.output.trim().split("\n")
      expect(lines).toHaveLength(4)
      for (const line of lines) expect(line).toMatch(/:\s+0{16}$/)
    })
  )

  it.scoped("a secret or a protected folder replaced by rename on the host stays out of reach", () =>
    Effect.gen(function* () {
      const w = world()
      const creds = path.join(w.home, ".git-credentials")
      fs.writeFileSync(creds, "https://u:old-token@example.com\n", { mode: 0o600 })
      const run = yield* runner(yield* Sandbox.make({ mode: "workspace-write", reuse }, { home: w.home }), w.root)
      expect(refusal(yield* run({ command: `cat ${creds}` }))).toContain(".git-credentials")
      // rewritten by rename, as credential helpers do; a hidden folder swapped for a new one
      fs.writeFileSync(`${creds}.new`, "https://u:new-token@example.com\n", { mode: 0o600 })
      fs.renameSync(`${creds}.new`, creds)
      fs.renameSync(path.join(w.home, ".ssh"), path.join(w.home, ".ssh-old"))
      fs.mkdirSync(path.join(w.home, ".ssh"), { mode: 0o700 })
      fs.writeFileSync(path.join(w.home, ".ssh", "id_ed25519"), SECRET, { mode: 0o600 })
      const again = yield* run({ command: `cat ${creds}` })
      expect(again.output).not.toContain("token")
      expect(refusal(again)).toContain(".git-credentials")
      const key = yield* run({ command: `cat ${w.home}/.ssh/id_ed25519` })
      expect(key.output).not.toContain("planted-secret")
      expect(refusal(key)).toContain(".ssh")
      // .git replaced by rename stays read-only
      fs.renameSync(path.join(w.root, ".git"), path.join(w.root, "git-old"))
      fs.cpSync(path.join(w.root, "git-old"), path.join(w.root, ".git"), { recursive: true })
      const gitConfig = fs.readFileSync(path.join(w.root, ".git", "config"), "utf8")
      expect(refusal(yield* run({ command: "echo '[core]' >> .git/config" }))).toContain(".git")
      expect(fs.readFileSync(path.join(w.root, ".git", "config"), "utf8")).toBe(gitConfig)
    })
  )
})

describe("Sandbox: the long-lived sandbox's channel", () => {
  it("a supervisor that exits says why, even when its exit is seen before its last stderr line", async () => {
    // ready, then it takes one request and exits; a process it leaves writes the reason a moment later
    const script = [
      "printf '\\005\\000\\000\\000\\000\\000\\000\\000\\000'",
      "read -r _",
      "(sleep 0.3; echo 'supervisor: out of descriptors' >&2) &",
      "exit 3"
    ].join("\n")
    const warm = await Warm.start({
      file: "/bin/sh",
      args: ["-c", script],
      env: process.env,
      stdio: [],
      started: () => {}
    })
    const child = warm.run({ argv: ["true"], cwd: "/", env: {} })
    let said = ""
    child.stderr.on("data", (d: Buffer) => (said += d.toString()))
    child.stdout.resume()
    const exited = new Promise<[number | null, string | null]>((resolve) =>
      child.once("exit", (code: number | null, signal: string | null) => resolve([code, signal]))
    )
    await new Promise<void>((resolve) => child.once("close", () => resolve()))
    const exit = await exited
    expect(exit).toEqual([null, "SIGKILL"])
    expect(said).toContain("the sandbox this command ran in ended (exit 3: supervisor: out of descriptors)")
    expect(warm.alive()).toBe(false)
  })
})

describe("Sandbox: where none can run", () => {
  it.scoped("commands run unsandboxed and the status says why, naming what to do", () =>
    Effect.gen(function* () {
      const w = world()
      const availability: Sandbox.Availability = {
        backend: "none",
        available: false,
        reason: "bubblewrap (bwrap) is not installed; install it (Debian/Ubuntu: apt-get install bubblewrap)",
        unixSocketsBlocked: false,
        processLimit: { _tag: "none", reason: "no sandbox" }
      }
      const sandbox = yield* Sandbox.make({ mode: "workspace-write" }, { home: w.home, availability })
      const run = yield* runner(sandbox, w.root)
      const r = yield* run({ command: `echo x > ${w.outside}/fallback.txt` })
      expect(r.exit_code).toBe(0)
      expect(fs.existsSync(path.join(w.outside, "fallback.txt"))).toBe(true)
      const status = yield* sandbox.status
      expect(status.active).toBe(false)
      expect(Sandbox.describe(status)).toBe(
        "no sandbox: bubblewrap (bwrap) is not installed; install it (Debian/Ubuntu: apt-get install bubblewrap). Commands run with your full rights, guarded by approvals only"
      )
    })
  )

  it("detect() says why bubblewrap is unusable when it is missing from PATH", () => {
    const saved = process.env.PATH
    process.env.PATH = tmp("muse-sbx-empty-path-")
    try {
      const a = Sandbox.detect({ refresh: true })
      if (process.platform === "linux") {
        expect(a.available).toBe(false)
        expect(a.reason).toContain("apt-get install bubblewrap")
      }
    } finally {
      process.env.PATH = saved
      Sandbox.detect({ refresh: true })
    }
  })

  it("detectInBackground() probes with the same processes and gives detect()'s answer", async () => {
    const background = Sandbox.detectInBackground({ refresh: true })
    expect(await background).toEqual(Sandbox.detect({ refresh: true }))
    const saved = process.env.PATH
    process.env.PATH = tmp("muse-sbx-empty-path-")
    try {
      const a = await Sandbox.detectInBackground({ refresh: true })
      if (process.platform === "linux") expect(a.reason).toContain("apt-get install bubblewrap")
      expect(a.available).toBe(false)
    } finally {
      process.env.PATH = saved
      await Sandbox.detectInBackground({ refresh: true })
    }
  })
})

describe("Sandbox: process-limit cgroups", () => {
  // only where muse runs as root with a writable pids cgroup: the limit is a cgroup per command there
  const cgroupDir = processLimit._tag === "cgroup" ? processLimit.dir : undefined
  if (!cgroupDir)
    console.warn(
      `cgroup cleanup test skipped: the process limit here is not a pids cgroup (${
        processLimit._tag === "none" ? processLimit.reason : processLimit._tag
      })`
    )
  it.skipIf(!cgroupDir)("detect() removes the groups of dead muse processes and keeps those of live ones", () => {
    const dir = cgroupDir!
    // a pid that ran and is gone, and one that runs (this test's parent)
    const dead = execFileSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], {
      encoding: "utf8"
    })
    const stale = path.join(dir, `muse-${dead}-1`)
    const live = path.join(dir, `muse-${process.ppid}-1`)
    fs.mkdirSync(stale)
    fs.mkdirSync(live)
    try {
      expect(fs.existsSync(path.join(stale, "pids.max"))).toBe(true)
      Sandbox.detect({ refresh: true })
      expect(fs.existsSync(stale)).toBe(false)
      expect(fs.existsSync(live)).toBe(true)
    } finally {
      for (const d of [stale, live]) {
        try {
          fs.rmdirSync(d)
        } catch {}
      }
    }
  })
})

/** A WarmChild's output and exit, once it closed. */
const outcome = (child: Warm.WarmChild) =>
  new Promise<{ code: number | null; signal: string | null; out: string; err: string }>((resolve) => {
    let out = ""
    let err = ""
    let code: number | null = null
    let signal: string | null = null
    child.stdout.on("data", (d: Buffer) => (out += d.toString()))
    child.stderr.on("data", (d: Buffer) => (err += d.toString()))
    child.once("exit", (c: number | null, s: string | null) => {
      code = c
      signal = s
    })
    child.once("error", (e: Error) => {
      err += e.message
    })
    child.once("close", () => resolve({ code, signal, out, err }))
  })

/** The spare launches (bash running the shim) under this process's supervisors. */
const spares = (): Array<number> => {
  const sups = new Set(supervisors())
  const found: Array<number> = []
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    let argv: Array<string>
    try {
      argv = fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0")
    } catch {
      continue
    }
    // the launcher the supervisor started for the next command, not yet given one
    if (!argv[0]?.endsWith("bwrap") || !argv.some((a) => a.includes("muse-sandbox: cannot run"))) continue
    if (sups.has(parentOf(Number(name)))) found.push(Number(name))
  }
  return found
}

describe.skipIf(!available || detected.backend !== "bubblewrap")("Sandbox: the long-lived sandbox's launches", () => {
  const bwrap = detected.program!
  const root = typeof process.getuid === "function" && process.getuid() === 0
  const supervisor = (spare: boolean) =>
    Warm.start({
      file: process.execPath,
      args: Warm.supervisorArgs({ nest: Warm.nestArgs(bwrap, root), spare }),
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      stdio: [],
      started: () => {}
    })
  // the supervisors unref themselves; a test keeps the loop alive while it waits on them
  const keep = setInterval(() => {}, 1000)
  afterAll(() => clearInterval(keep))

  it.each([
    { launch: "the spare launch", spare: true },
    { launch: "a launch of its own", spare: false }
  ])(
    "$launch: the launcher never loads what a command's LD_PRELOAD names; the command gets its env and cwd",
    async ({ spare }) => {
      const dir = tmp("muse-sbx-preload-")
      // what a command could leave in its folder for the next launch: ld.so names it when it tries it
      fs.writeFileSync(path.join(dir, "planted.so"), "not a library\n")
      const warm = await supervisor(spare)
      try {
        for (let i = 0; i < 3; i++) {
          const r = await outcome(
            warm.run({
              argv: ["/bin/sh", "-c", 'pwd; printf "%s|" "$LD_PRELOAD" "$ODD"; echo; exit 7'],
              cwd: dir,
              env: { PATH: "/usr/bin:/bin", LD_PRELOAD: "./planted.so", ODD: "a b\nc\td=e" }
            })
          )
          expect(r.code).toBe(7)
          expect(r.out).toBe(`${dir}\n./planted.so|a b\nc\td=e|\n`)
          // the command's own loader tries it once; the launcher (which holds CAP_SYS_ADMIN as root) never
          expect(r.err.split("\n").filter((l) => l.includes("planted.so"))).toHaveLength(1)
        }
      } finally {
        warm.stop()
      }
    }
  )

  it("a spare launch is ready between commands, is replaced when it dies, and ends with the sandbox", async () => {
    const warm = await supervisor(true)
    const waitFor = async (check: () => boolean) => {
      const end = Date.now() + 20_000
      while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 25))
      return check()
    }
    try {
      expect(await waitFor(() => spares().length === 1)).toBe(true)
      const first = spares()[0]!
      const r = await outcome(warm.run({ argv: ["sh", "-c", "echo $$"], cwd: "/", env: { PATH: "/usr/bin:/bin" } }))
      expect(r).toMatchObject({ code: 0, signal: null })
      // another is ready for the next command
      expect(await waitFor(() => spares().length === 1 && spares()[0] !== first)).toBe(true)
      // one that died is not used: the command starts as it would without one
      process.kill(spares()[0]!, "SIGKILL")
      expect(await waitFor(() => spares().length === 0)).toBe(true)
      const again = await outcome(warm.run({ argv: ["echo", "still"], cwd: "/", env: { PATH: "/usr/bin:/bin" } }))
      expect(again).toMatchObject({ code: 0, out: "still\n" })
      // a program that is not there, and a folder that is not: said, exit 127 or bubblewrap's 1
      expect(await waitFor(() => spares().length === 1)).toBe(true)
      const missing = await outcome(warm.run({ argv: ["no-such-program-x"], cwd: "/", env: { PATH: "/usr/bin:/bin" } }))
      expect(missing.err).toMatch(/^(muse-sandbox: cannot run|bwrap: execvp) no-such-program-x/)
      expect(missing.code).not.toBe(0)
      // killed by a signal: as without the spare
      expect(await waitFor(() => spares().length === 1)).toBe(true)
      const killed = await outcome(
        warm.run({ argv: ["sh", "-c", "kill -9 $$"], cwd: "/", env: { PATH: "/usr/bin:/bin" } })
      )
      expect(killed.code === 137 || killed.signal === "SIGKILL").toBe(true)
    } finally {
      warm.stop()
    }
    expect(await waitFor(() => spares().length === 0)).toBe(true)
  })

  it.scoped("a sandbox retired between the prepare and the run of a command waits for that command", () =>
    Effect.gen(function* () {
      const w = world()
      const netrc = path.join(w.home, ".netrc")
      const sandbox = yield* Sandbox.make({ mode: "workspace-write", reuse: true }, { home: w.home })
      const request = { argv: ["sh", "-c", "echo ran"], cwd: w.root, root: w.root, env: process.env }
      const launch = yield* sandbox.prepare(request)
      expect(launch?.run).toBeDefined()
      // a hidden file replaced by rename: the next command gets a new sandbox, the old one is retired
      fs.writeFileSync(`${netrc}.new`, "machine example.com password new\n")
      fs.renameSync(`${netrc}.new`, netrc)
      const later = yield* Effect.scoped(sandbox.prepare(request))
      expect(later?.run).toBeDefined()
      const r = yield* Effect.promise(() => outcome(launch!.run!()))
      expect(r).toMatchObject({ code: 0, out: "ran\n" })
    })
  )
})
