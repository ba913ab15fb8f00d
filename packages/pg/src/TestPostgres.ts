/**
 * A private Postgres server for tests and benchmarks: a fresh cluster in a temporary folder on a
 * free port, started from the PostgreSQL binaries of the machine (`initdb`, `postgres`; on Debian
 * the `postgresql` package puts them in `/usr/lib/postgresql/<version>/bin`), stopped and removed
 * by `stop()` — or, if the process that started it dies first, by the server's own watchdog.
 *
 * Run as root, the server runs as the `postgres` user (Postgres refuses to run as root).
 *
 * Where the binaries are: `MUSE_PG_BIN`, else the newest `/usr/lib/postgresql/<v>/bin`, else
 * `initdb` on the `PATH`. `MUSE_TEST_PG_URL` names an existing server to use instead (tests then
 * work in schemas of their own). `availability()` says which of these applies, or why none does.
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
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
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
  | { readonly _tag: "binaries"; readonly bin: string }
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

/** Where the server comes from on this machine, or why there is none. */
export const availability = (env: NodeJS.ProcessEnv = process.env): Availability => {
  if (env.MUSE_TEST_PG_URL) return { _tag: "url", url: env.MUSE_TEST_PG_URL }
  const candidates: Array<string> = []
  if (env.MUSE_PG_BIN) candidates.push(env.MUSE_PG_BIN)
  try {
    const versions = fs
      .readdirSync("/usr/lib/postgresql")
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a))
    for (const v of versions) candidates.push(path.join("/usr/lib/postgresql", v, "bin"))
  } catch {}
  for (const dir of (env.PATH ?? "").split(path.delimiter)) if (dir) candidates.push(dir)
  for (const dir of candidates) {
    if (executable(path.join(dir, "initdb")) && executable(path.join(dir, "postgres"))) {
      return { _tag: "binaries", bin: dir }
    }
  }
  return {
    _tag: "missing",
    reason:
      "PostgreSQL is not installed here (no initdb/postgres in MUSE_PG_BIN, /usr/lib/postgresql/*/bin or the PATH). " +
      "Install it (Debian/Ubuntu: apt-get install postgresql), or set MUSE_TEST_PG_URL to a server to use"
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

/** uid and gid of the `postgres` user, when this process runs as root and must hand the server over. */
const serverUser = (): { readonly uid: number; readonly gid: number } | undefined => {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return undefined
  const line = fs
    .readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith("postgres:"))
  if (!line) {
    throw new Error(
      "running as root, and there is no postgres user to run the test server as (Postgres refuses to run as root)"
    )
  }
  const [, , uid, gid] = line.split(":")
  return { uid: Number(uid), gid: Number(gid) }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Start a private server (see the module comment). */
export const start = async (
  options: { readonly bin?: string | undefined; readonly maxConnections?: number | undefined } = {}
): Promise<Server> => {
  const found = options.bin ? { _tag: "binaries" as const, bin: options.bin } : availability()
  if (found._tag === "missing") throw new Error(found.reason)
  if (found._tag === "url")
    return { url: found.url, port: Number(new URL(found.url).port || 5432), stop: async () => {} }
  const bin = found.bin
  const user = serverUser()
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
      `"$BIN/initdb" -D "$D/data" -U muse --pwfile="$D/pw" -A scram-sha-256 -E UTF8 --locale=C --no-sync >/dev/null 2>&1 || { "$BIN/initdb" --version >&2; echo "initdb failed in $D" >&2; rm -rf "$D"; exit 3; }`,
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
    child.stderr!.on("data", (d: Buffer) => {
      said = (said + d.toString("utf8")).slice(-8_000)
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
    const deadline = Date.now() + 60_000
    let ready = false
    while (!exited && Date.now() < deadline) {
      try {
        execFileSync(path.join(bin, "pg_isready"), ["-q", "-h", "127.0.0.1", "-p", String(port), "-t", "1"], {
          stdio: "ignore"
        })
        ready = true
        break
      } catch {
        await sleep(100)
      }
    }
    if (ready) {
      process.once("exit", () => {
        if (!exited) child.stdin!.destroy()
      })
      return { url: `postgres://muse:${password}@127.0.0.1:${port}/postgres`, port, stop }
    }
    await stop()
    if (spawnError) {
      throw new Error(
        `the test Postgres server did not start: ${spawnError.message}` +
          (user ? ` (starting /bin/sh as the postgres user, uid ${user.uid})` : "")
      )
    }
    lastError = said.trim() || (Date.now() >= deadline ? "not ready after 60 s" : "the server exited")
    if (!/could not bind|already in use/i.test(lastError)) break
  }
  throw new Error(`the test Postgres server did not start:\n${lastError}`)
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
