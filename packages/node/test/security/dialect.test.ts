/**
 * Red-team corpus, where a parser and `sh` could disagree: here-document endings, CRLF, comments,
 * backslashes, quotes, bash-only syntax. Each line really runs in `sh` (dash here) with stub
 * programs that log what ran; whatever the engine lets through must have run nothing else.
 */
import { afterAll, describe, expect, it } from "vitest"
import { decide, sandbox } from "./support.js"

const box = sandbox(["safe", "rm", "catx"])
afterAll(() => box.cleanup())

const lines: ReadonlyArray<string> = [
  "catx <<EOF\nrm victim\nEOF",
  "catx <<EOF\nEOF \nrm victim\nEOF",
  "catx <<EOF\n EOF\nrm victim\nEOF",
  "catx <<EOF\nEOF\r\nrm victim\nEOF",
  "catx <<-EOF\n\tEOF\nrm victim",
  "catx <<-EOF\n  EOF\nrm victim\nEOF",
  "catx <<'EOF'\n$(rm victim)\nEOF",
  'catx <<"EOF"\n`rm victim`\nEOF',
  "catx <<E\\OF\n$(rm victim)\nEOF",
  "catx <<EOF\n$(rm victim)\nEOF",
  "catx <<EOF\n\\$(rm victim)\nEOF",
  "catx <<EOF; rm victim\nx\nEOF",
  "catx <<EOF && rm victim\nx\nEOF",
  "catx <<A <<B\na\nA\nrm victim\nB",
  "catx <<EOF\nx\nEOF\nrm victim",
  "safe\r\nrm victim",
  "safe \\\r\nrm victim",
  "safe #\\\nrm victim",
  "safe # x \\\nrm victim",
  "safe a#; rm victim",
  "safe '#'; rm victim",
  "safe \\#; rm victim",
  "safe $'\\''; rm victim; safe \\''",
  "safe $'a\\'b' ; rm victim ; safe '",
  'safe $"x" ; rm victim',
  'safe "a\\"; rm victim; safe \\""',
  "safe 'a\\'; rm victim; safe '",
  "safe \"$(echo ')')\"; rm victim",
  "safe ${x-'}'}; rm victim",
  'safe ${x:-"}"}; rm victim',
  "safe `echo \\`rm victim\\``",
  "safe $(: ')'; rm victim)",
  "safe $(case x in x) rm victim;; esac)",
  "safe <<< x; rm victim",
  "safe &> /dev/null; rm victim",
  "safe |& rm victim",
  "safe ; ; rm victim",
  "safe && \n rm victim",
  "safe || \\\n rm victim",
  "safe\u00a0;rm victim",
  "safe ;\u00a0rm victim",
  "safe\u2028rm victim",
  "safe \\\nrm victim",
  "{ safe; rm victim; }",
  "{safe; rm victim;}",
  "(safe) (rm victim)",
  "safe () { rm victim; }; safe",
  "function safe { rm victim; }; safe",
  "alias safe=rm; safe victim",
  "safe=rm; $safe victim",
  'set -- rm victim; "$@"',
  "IFS=x; safe xrmxvictim",
  "eval safe\\;rm\\ victim",
  "safe $'\\x3b' rm victim",
  "safe `# comment` ; rm victim",
  "safe $(#)\nrm victim",
  "r\\\nm victim",
  "r\\\n\\\nm victim",
  "safe\vrm victim",
  "safe\frm victim",
  "rm\rvictim",
  "safe 'a\\\nb'; rm victim",
  "'r'\"m\" victim",
  "safe a\\ b\\;rm victim",
  "[ x ] || rm victim",
  "[ x = x ] && rm victim",
  "test x && rm victim",
  "! safe || rm victim",
  "safe | safe | rm victim",
  "for x in rm; do $x victim; done",
  "while safe; do rm victim; break; done",
  "until safe; do rm victim; done",
  "if safe; then safe; else rm victim; fi",
  "case a in b) ;; *) rm victim;; esac",
  "x=$(rm victim) safe",
  'safe > "$(rm victim)"',
  "safe 2>&1 >&- <&- ; rm victim",
  "exec 3>&1; rm victim",
  "command -- rm victim",
  "env -- rm victim",
  "timeout -- 5 rm victim",
  "xargs -- rm victim < /dev/null",
  "find . -maxdepth 0 -exec rm victim \\;",
  "find . -maxdepth 0 -exec sh -c 'rm victim' \\;",
  "sh -c 'safe; rm victim'",
  'sh -c "safe; rm victim"',
  "sh -c safe\\;rm\\ victim",
  "sh -ec 'rm victim'",
  "sh -c -e 'rm victim'",
  "sh -c 'rm victim' sh",
  "sh -s < /dev/null; rm victim",
  "nice -n 1 rm victim",
  "nohup rm victim > /dev/null",
  "exec rm victim",
  "safe & rm victim & wait"
]

describe("red team: lines where a parser and sh could disagree, run in a real sh", () => {
  it.each(lines.map((l) => [JSON.stringify(l), l] as const))("%s", async (_, line) => {
    const allow = await decide(line, { mode: "ask", rules: ["allow:safe *", "allow:catx *"] })
    const deny = await decide(line, { mode: "auto", rules: ["deny:rm*"] })
    if (allow !== "allow" && deny !== "allow") return
    const ran = box.run(line).map((argv) => argv[0])
    if (allow === "allow") for (const name of ran) expect(["safe", "catx"], `ran ${name}`).toContain(name)
    if (deny === "allow") expect(ran, "rm ran").not.toContain("rm")
  })

  it("the oracle sees what runs (a control line)", () => {
    expect(box.run("safe; rm victim").map((a) => a[0])).toEqual(["safe", "rm"])
    expect(box.run("catx <<EOF\nx\nEOF\nrm victim").map((a) => a[0])).toEqual(["catx", "rm"])
  })
})
