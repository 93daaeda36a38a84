"""Which Spark methods and fields a JAR of the extension calls that a Spark installation lacks.

A JAR built for one Spark line also runs on the next (Spark 4.3 runs the 4.2 JAR), and a Spark
method whose signature changes between lines fails only when a query reaches the call, with a
NoSuchMethodError. This reads the JAR's bytecode with the JDK's `javap` and resolves every
reference into `org.apache.spark` against the classes of the running pyspark, superclasses and
interfaces included.

Scala adds a forwarder to every method of a trait an object mixes in (`JoinSelectionHelper`'s
dozens of helpers); a forwarder nobody calls is never linked, so a forwarder's references count
only where other code of the JAR calls it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from collections import defaultdict
from pathlib import Path

_REF = re.compile(r"// (?:Method|InterfaceMethod|Field) ([\w/$]+)\.\"?([\w$<>]+)\"?:(\S+)")


def _strip_generics(line: str) -> str:
    while "<" in line and ">" in line:
        stripped = re.sub(r"<[^<>]*>", "", line)
        if stripped == line:
            break
        line = stripped
    return line


def _javap(*args: str) -> str:
    javap = shutil.which("javap")
    if javap is None:
        raise RuntimeError("javap not found: the linkage check needs a JDK (Java 17) on PATH")
    return subprocess.run([javap, *args], capture_output=True, text=True, check=False).stdout


def _member_name(header: str, cls: str) -> str | None:
    header = _strip_generics(header.strip())
    if header.startswith("static {}"):
        return "<clinit>"
    if "(" in header:
        name = header.split("(", 1)[0].split()[-1]
        return "<init>" if name == cls.replace("/", ".") else name
    if header.endswith(";"):
        return header[:-1].split()[-1]
    return None


def spark_references(jar: Path) -> set[tuple[str, str, str]]:
    """(owner, name, descriptor) of the Spark members the JAR's reachable code refers to."""
    names = [n[:-6] for n in zipfile.ZipFile(jar).namelist() if n.endswith(".class")]
    own = set(names)
    text = _javap("-c", "-p", "-cp", str(jar), *[n.replace("/", ".") for n in names])
    # per method (class, name): its references, and whether it only forwards to one method
    refs: dict[tuple[str, str], list[tuple[str, str, str]]] = defaultdict(list)
    cls = method = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and ("class " in line or "interface " in line):
            m = re.search(r"(?:class|interface) ([\w.$]+)", _strip_generics(line))
            cls, method = (m.group(1).replace(".", "/"), None) if m else (None, None)
        elif cls and line.startswith("  ") and not line.startswith("   "):
            name = _member_name(line, cls)
            method = (cls, name) if name else None
            if method:
                refs.setdefault(method, [])
        elif method:
            m = _REF.search(line)
            if m:
                refs[method].append((m.group(1), m.group(2), m.group(3)))

    def forwarder(key: tuple[str, str]) -> bool:
        # a trait's forwarder calls the trait's static `name$`; an object's static forwarder
        # reads MODULE$ and calls the same-named method of the object
        calls = [c for c in refs[key] if c[1] != "MODULE$"]
        return len(calls) == 1 and (
            calls[0][1] == key[1] + "$" or (calls[0][0] in own and calls[0][1] == key[1]))

    found: set[tuple[str, str, str]] = set()
    todo = [r for key, rs in refs.items() if not forwarder(key) for r in rs]
    seen: set[tuple[str, str]] = set()
    while todo:
        owner, name, desc = todo.pop()
        if owner in own:
            key = (owner, name)
            if key not in seen and key in refs and forwarder(key):
                seen.add(key)
                todo.extend(refs[key])
        elif owner.startswith("org/apache/spark/"):
            found.add((owner, name, desc))
    return found


def missing_in(references: set[tuple[str, str, str]], classpath: str) -> list[str]:
    """The references that no class of `classpath` (or its ancestors) declares."""
    members: dict[str, set[tuple[str, str]]] = {}
    parents: dict[str, list[str]] = {}
    wanted = {owner for owner, _, _ in references}
    while wanted - members.keys():
        batch = sorted(wanted - members.keys())
        for owner in batch:
            members[owner] = set()
            parents[owner] = []
        text = _javap("-p", "-s", "-cp", classpath, *[o.replace("/", ".") for o in batch])
        cls = last = None
        for line in text.splitlines():
            if line and not line.startswith(" ") and ("class " in line or "interface " in line):
                header = _strip_generics(line).rstrip(" {")
                m = re.search(r"(?:class|interface) ([\w.$]+)", header)
                cls = m.group(1).replace(".", "/") if m else None
                supers = re.findall(r"(?:extends|implements) ([\w.$, ]+?)(?= implements|$)", header)
                parents[cls] = [s.strip().replace(".", "/") for group in supers
                                for s in group.split(",") if s.strip()] + ["java/lang/Object"]
                members.setdefault(cls, set())
                wanted.update(parents[cls])
            elif cls and line.startswith("  ") and not line.startswith("    "):
                last = _member_name(line, cls)
            elif cls and last and line.strip().startswith("descriptor:"):
                members[cls].add((last, line.split(":", 1)[1].strip()))
        if not any(members[o] for o in batch) and not text:
            raise RuntimeError(f"javap read nothing from {classpath}")

    def declares(owner: str, name: str, desc: str, visited: set[str]) -> bool:
        if owner in visited:
            return False
        visited.add(owner)
        return (name, desc) in members.get(owner, ()) or any(
            declares(p, name, desc, visited) for p in parents.get(owner, ()))

    return sorted(f"{o.replace('/', '.')}.{n}{d}" for o, n, d in references
                  if not declares(o, n, d, set()))
