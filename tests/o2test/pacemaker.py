# SPDX-License-Identifier: GPL-2.0-or-later
"""pacemaker on the nodes of a cluster.Cluster: its directories and the
agents under test (an overlay on /usr/lib/ocf/resource.d inside the nodes),
a seed CIB (no fencing), pacemakerd started and stopped, and what it says.

    ocf_dir = install_agent(tmp, "ocfs2d", "volume", agent)
    cluster = Cluster(tmp, 2, extra=pacemaker_dirs(ocf_dir))
    for nd in cluster.nodes:
        seed_cib(nd)
    pcmk = [start_pacemaker(nd) for nd in cluster.nodes]
    ...
    stop_pacemaker(pcmk)
"""
import os
import shutil
import subprocess

CIB = """<cib validate-with="pacemaker-3.0" epoch="1" num_updates="0" admin_epoch="0">
  <configuration>
    <crm_config>
      <cluster_property_set id="cib-bootstrap-options">
        <nvpair id="opt-dc-deadtime" name="dc-deadtime" value="2s"/>
        <nvpair id="opt-stonith" name="stonith-enabled" value="false"/>
        <nvpair id="opt-recheck" name="cluster-recheck-interval" value="10s"/>
      </cluster_property_set>
    </crm_config>
    <nodes/>
    <resources/>
    <constraints/>
  </configuration>
  <status/>
</cib>
"""


def install_agent(tmp, provider, name, agent):
    """A directory (returned) for pacemaker_dirs holding agent as ocf:PROVIDER:NAME."""
    ocf_dir = os.path.join(tmp, "ocf")
    os.makedirs(os.path.join(ocf_dir, provider))
    shutil.copy(agent, os.path.join(ocf_dir, provider, name))
    os.chmod(os.path.join(ocf_dir, provider, name), 0o755)
    return ocf_dir


def pacemaker_dirs(ocf_dir):
    """Cluster's extra for pacemaker: each node named nN, with its own
    /var/lib/pacemaker and /var/log/pacemaker (under its top directory),
    and the agents in ocf_dir (see install_agent) over /usr/lib/ocf/resource.d."""
    def extra(top, i):
        return (f"hostname n{i}; "
                f"mkdir -p {top}/pcmk-lib/cib {top}/pcmk-lib/pengine {top}/pcmk-lib/blackbox "
                f"{top}/pcmk-lib/cores {top}/pcmk-log; "
                f"chown -R hacluster:haclient {top}/pcmk-lib {top}/pcmk-log; "
                f"mount --bind {top}/pcmk-lib /var/lib/pacemaker; "
                f"mount --bind {top}/pcmk-log /var/log/pacemaker; "
                f"mount -t overlay overlay -o lowerdir={ocf_dir}:/usr/lib/ocf/resource.d "
                "/usr/lib/ocf/resource.d; ")
    return extra


def seed_cib(node):
    """The CIB node's pacemaker starts from (CIB: no fencing, quick DC election)."""
    path = os.path.join(node.top, "pcmk-lib", "cib", "cib.xml")
    with open(path, "w") as f:
        f.write(CIB)
    shutil.chown(path, "hacluster", "haclient")
    os.chmod(path, 0o600)


def start_pacemaker(node):
    """pacemakerd in node's namespaces (its Popen), logging to its pacemaker.log."""
    log = open(os.path.join(node.top, "pacemakerd.out"), "w")
    return subprocess.Popen(node.enter() + ["env", "PCMK_logfacility=none",
                                            "PCMK_logfile=/var/log/pacemaker/pacemaker.log",
                                            "pacemakerd"],
                            stdout=log, stderr=subprocess.STDOUT)


def stop_pacemaker(pcmk):
    """End the pacemakerd processes start_pacemaker returned."""
    for p in pcmk:
        if p.poll() is None:
            p.terminate()
    for p in pcmk:
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()


def show_log(node, needle, last=60):
    """The lines of node's pacemaker.log that say needle (the last ones)."""
    try:
        with open(os.path.join(node.top, "pcmk-log", "pacemaker.log")) as f:
            lines = f.read().splitlines()
        print(f"---- n{node.nodeid} pacemaker.log (agent lines, last {last}) ----")
        print("\n".join([ln for ln in lines if needle in ln][-last:]))
    except OSError:
        pass


def location(node, resource="vol"):
    """The node resource runs on (n1, n2, ...), or None."""
    r = node.run(["crm_resource", "--locate", "--resource", resource])
    for line in r.stdout.splitlines():
        if "is running on:" in line:
            return line.split(":")[-1].strip()
    return None


def fail_counts(node, resource="vol", names=("n1", "n2")):
    """{node name: resource's fail count there}, for the nodes names."""
    counts = {}
    for name in names:
        r = node.run(["crm_failcount", "--query", "--resource", resource, "--node", name])
        value = r.stdout.strip().rpartition("value=")[2]
        counts[name] = int(value) if value.isdigit() else 0
    return counts
