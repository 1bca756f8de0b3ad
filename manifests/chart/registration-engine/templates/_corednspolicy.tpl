{{/*
The admission policy that limits what a ServiceAccount of the engine may
write into CoreDNS's configuration (coredns-policy.yaml explains it), and
its binding. Called with (dict "root" $ "policy" NAME "serviceAccount" SA
"annotations" DICT "removeOnly" BOOL): the engine's own
(coredns-policy.yaml), and the uninstall hook's copy for the cleanup's
ServiceAccount (cleanup-job.yaml), since the release's own policy is gone
when that hook runs. removeOnly (the hook's) adds one rule: the token may
take the engine's lines out, never write one.
*/}}
{{- define "registration-engine.corednsPolicy" -}}
{{- $policy := .policy -}}
{{- $serviceAccount := .serviceAccount -}}
{{- $annotations := .annotations -}}
{{- $removeOnly := .removeOnly -}}
{{- with .root -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ $policy }}
  labels:
    {{- include "registration-engine.labels" . | nindent 4 }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  # An expression that fails to evaluate refuses the request.
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: kube-system
    resourceRules:
      # A patch is an UPDATE. The Roles grant no create, update or delete
      # on these ConfigMaps, so an UPDATE is all the engine can send.
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["UPDATE"]
        resources: ["configmaps"]
        resourceNames: ["coredns-custom", "coredns"]
  # Only the engine's requests (its ServiceAccount's, or at uninstall the
  # cleanup hook's): administrators and AKS's own reconciler edit CoreDNS
  # as before.
  matchConditions:
    - name: registration-engine
      expression: "request.userInfo.username == 'system:serviceaccount:{{ .Release.Namespace }}:{{ $serviceAccount }}'"
  variables:
    # Whether an entry may map a name to a loopback address: only for test
    # installs, whose fake update servers listen on loopback (the value
    # inClusterDNSTestLoopback; overlays/e2e sets "true"). Nowhere else does an
    # update server answer on loopback.
    - name: allowLoopback
      expression: {{ ternary "true" "false" (eq (toString .Values.inClusterDNSTestLoopback) "true") | quote }}
    # UPDATE_SERVER_DOMAINS: the only names the engine may map.
    - name: domains
      expression: "[{{ include "registration-engine.updateServerDomainsCEL" . }}]"
    # Addresses of the cluster's own networks (private, shared, unique
    # local; they hold AKS's default service and pod CIDRs, 10.0.0.0/16 and
    # 10.244.0.0/16): in a hosts block that answers reverse queries, an
    # entry for one of them would rename a Service, pod or node address for
    # every PTR lookup in the cluster. Link-local addresses are no unicast
    # addresses here at all. The value clusterAddressRanges.
    - name: clusterRanges
      expression: "[{{ include "registration-engine.clusterAddressRangesCEL" . }}]"
    # The one data key the engine writes: its own key in coredns-custom
    # (job/incluster/coredns DefaultHostsKey), the Corefile in coredns.
    - name: ownKey
      expression: "object.metadata.name == 'coredns-custom' ? 'registration-engine.override' : 'Corefile'"
    - name: oldData
      expression: "oldObject.?data.orValue({})"
    - name: newData
      expression: "object.?data.orValue({})"
    # The old [0] and new [1] value of ownKey.
    - name: texts
      expression: |-
        [variables.oldData, variables.newData].map(d, variables.ownKey in d ? d[variables.ownKey] : '')
    # Each value cut before every brace: a piece starts with the brace
    # before it ("{" or "}"), the first piece with neither. Every check
    # below looks at a piece and its neighbour only, so the policy's cost
    # grows with the length of the Corefile, not with its square (a check
    # of each line against every line above it exceeded the API server's
    # cost limit at about 300 lines). U+0001 marks the cuts; a value that
    # holds it is refused.
    - name: pieces
      expression: |-
        variables.texts.map(t, t.replace('{', '\u0001{').replace('}', '\u0001}').split('\u0001'))
    # Each piece's lines: the first is the rest of the brace's line, the
    # last the start of the next brace's line; those between are whole
    # lines without braces.
    - name: frags
      expression: "variables.pieces.map(ps, ps.map(p, p.split('\\n')))"
    # Each line's words, as CoreDNS reads them.
    - name: words
      expression: "variables.frags.map(ps, ps.map(ls, ls.map(l, l.trim().split(' '))))"
    # For each word: whether it is a DNS name under domains.
    - name: named
      expression: |-
        variables.words.map(ps, ps.map(ls, ls.map(w, w.map(n,
          n.matches('^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?([.][a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$') &&
          variables.domains.exists(d, n == d || n.endsWith('.' + d))))))
    # For each piece: whether it is a hosts block, the brace ending a line
    # of its own "hosts [FILE [ZONES…]] {".
    - name: hostsOpen
      expression: |-
        variables.frags.map(fs, fs.transformList(k, f,
          k > 0 && f[0].trim() == '{' && (k == 1 || fs[k - 1].size() >= 2) &&
          fs[k - 1][fs[k - 1].size() - 1].trim().matches('^hosts([ \t][^{}]*)?$')))
    # For each piece: whether it is a hosts block that answers no reverse
    # (PTR) queries for its entries.
    - name: noReverse
      expression: |-
        [0, 1].map(s, variables.frags[s].transformList(k, f,
          variables.hostsOpen[s][k] && f.exists(l, l.trim() == 'no_reverse')))
    # What each line is:
    #   entry        "<IP> <name>…", every name under domains, the address
    #                unicast (not unspecified, multicast, broadcast or
    #                link-local such as 169.254.169.254), not loopback
    #                unless allowLoopback, and in a block that answers
    #                reverse queries not in clusterRanges
    #   ttl          "ttl N", 1 <= N <= 3600
    #   fallthrough  a bare fallthrough (one with zones would hide names)
    #   no_reverse   a bare no_reverse
    #   other        anything else
    - name: kinds
      expression: |-
        [0, 1].map(s, variables.words[s].transformList(k, ls, ls.transformList(i, w,
          w == ['fallthrough'] ? 'fallthrough' :
          w == ['no_reverse'] ? 'no_reverse' :
          w.size() == 2 && w[0] == 'ttl' && w[1].matches('^[0-9]{1,4}$') &&
            int(w[1]) >= 1 && int(w[1]) <= 3600 ? 'ttl' :
          w.size() >= 2 && isIP(w[0]) &&
            (ip(w[0]).isLoopback() ? variables.allowLoopback :
              ip(w[0]).isGlobalUnicast() &&
              (variables.noReverse[s][k] || !variables.clusterRanges.exists(c, cidr(c).containsIP(ip(w[0]))))) &&
            variables.named[s][k][i].all(j, n, j == 0 || n) ? 'entry' :
          'other')))
    # The engine's own lines: entries and ttl lines that are whole lines
    # directly inside a hosts block.
    - name: own
      expression: |-
        [0, 1].map(s, variables.kinds[s].transformList(k, ks, ks.transformList(i, kind,
          (kind == 'entry' || kind == 'ttl') && variables.hostsOpen[s][k] && i > 0 &&
          (i < ks.size() - 1 || k == variables.kinds[s].size() - 1))))
    # Every other line, old [0] and new [1], piece by piece: what must not
    # change. A hosts block's opening line limited to a zone of the
    # cluster's own counts without the zones under domains it names (the
    # engine adds the update server's name to a block limited to zones,
    # "hosts /etc/hosts corp.internal {", that would not answer it). A
    # block without such a zone ("hosts /etc/coredns/NodeHosts {", which
    # answers every name) counts as it is: a zone added there would narrow
    # it to that zone, and the engine never adds one.
    - name: kept
      expression: |-
        [0, 1].map(s, variables.frags[s].transformList(k, fs, fs.transformList(i, l, !variables.own[s][k][i],
          k + 1 < variables.frags[s].size() && i == fs.size() - 1 && variables.hostsOpen[s][k + 1] &&
            variables.words[s][k][i].exists(j, w, j >= 2 && w != '' && !variables.named[s][k][i][j]) ?
            variables.words[s][k][i].transformList(j, w, j < 2 || !variables.named[s][k][i][j], w).join(' ') :
            l)))
    # How many of the engine's entries, old [0] and new [1], are in hosts
    # blocks that answer reverse (PTR) queries (a block shared with the
    # cluster, without no_reverse): each renames its address in every PTR
    # answer. The engine keeps one there, its update server's.
    - name: sharedEntries
      expression: |-
        [0, 1].map(s, variables.kinds[s].transformList(k, ks, !variables.noReverse[s][k],
          ks.transformList(i, kind, kind == 'entry' && variables.own[s][k][i], 1).size()).sum())
    # SUSE's Python engine's coredns-custom key (job/incluster/coredns
    # PythonEngineKey): its old value's non-blank lines, as words.
    - name: legacyWords
      expression: |-
        variables.oldData[?'registration.override'].orValue('').split('\n')
          .map(l, l.trim().split(' ').filter(w, w != '')).filter(ws, ws.size() > 0)
    # The engine's takeover of that key: one edit of coredns-custom that
    # writes the engine's key and removes the Python engine's, which held
    # exactly that engine's block and nothing else: "hosts {", entries
    # "<unicast IP> <name under domains>", one bare "fallthrough", "}".
    - name: legacyTakeover
      expression: |-
        object.metadata.name == 'coredns-custom' &&
        variables.ownKey in variables.newData &&
        !('registration.override' in variables.newData) &&
        variables.legacyWords.size() >= 4 &&
        variables.legacyWords[0] == ['hosts', '{'] &&
        variables.legacyWords[variables.legacyWords.size() - 1] == ['}'] &&
        variables.legacyWords.filter(ws, ws == ['hosts', '{'] || ws == ['}']).size() == 2 &&
        variables.legacyWords.filter(ws, ws == ['fallthrough']).size() == 1 &&
        variables.legacyWords.all(ws, ws == ['hosts', '{'] || ws == ['}'] || ws == ['fallthrough'] ||
          (ws.size() >= 2 && isIP(ws[0]) && (ip(ws[0]).isGlobalUnicast() || ip(ws[0]).isLoopback()) &&
            ws.filter(w, isIP(w)).size() == 1 &&
            ws.filter(w, !isIP(w)).all(n,
              n.matches('^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?([.][a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$') &&
              variables.domains.exists(d, n == d || n.endsWith('.' + d)))))
  validations:
    # The rest of the ConfigMap stays: other keys, and metadata that would
    # let a token delete it (an owner reference the garbage collector
    # follows) or keep it (a finalizer). The engine's own key may go
    # (registration-engine cleanup, at helm uninstall); in coredns that key
    # is the Corefile, which the third rule keeps.
    - expression: |-
        variables.newData.all(k, k == variables.ownKey ||
          (k in variables.oldData && variables.oldData[k] == variables.newData[k])) &&
        variables.oldData.all(k, k == variables.ownKey || k in variables.newData || (k == 'registration.override' && variables.legacyTakeover)) &&
        object.?binaryData.orValue({}) == oldObject.?binaryData.orValue({}) &&
        object.?immutable.orValue(false) == oldObject.?immutable.orValue(false) &&
        object.metadata.?labels.orValue({}) == oldObject.metadata.?labels.orValue({}) &&
        object.metadata.?annotations.orValue({}) == oldObject.metadata.?annotations.orValue({}) &&
        object.metadata.?ownerReferences.orValue([]) == oldObject.metadata.?ownerReferences.orValue([]) &&
        object.metadata.?finalizers.orValue([]) == oldObject.metadata.?finalizers.orValue([])
      messageExpression: |-
        'the registration engine may change only data key ' + variables.ownKey +
        ' of kube-system/' + object.metadata.name +
        '; every other key, binaryData, immutable, labels, annotations, owner references and finalizers must stay as they are' +
        ' (SUSE\'s Python engine\'s key registration.override may go only when it holds nothing but that engine\'s hosts block)'
    # The marker of the pieces' cuts cannot be forged.
    - expression: "!variables.texts[1].contains('\\u0001')"
      message: "the registration engine never writes U+0001 into CoreDNS's configuration"
    # coredns-custom: the engine's key, when it changes, holds exactly the
    # engine's hosts block, which answers no reverse queries.
    - expression: |-
        object.metadata.name != 'coredns-custom' ||
        !(variables.ownKey in variables.newData) ||
        (variables.ownKey in variables.oldData && variables.oldData[variables.ownKey] == variables.newData[variables.ownKey]) ||
        (variables.pieces[1].size() == 3 &&
          variables.pieces[1][0].trim() == 'hosts' &&
          variables.hostsOpen[1][1] &&
          variables.pieces[1][2].trim() == '}' &&
          variables.kinds[1][1].all(i, k, i == 0 || variables.frags[1][1][i].trim() == '' ||
            k in ['entry', 'ttl', 'fallthrough', 'no_reverse']) &&
          variables.kinds[1][1].exists(k, k == 'entry') &&
          variables.kinds[1][1].exists_one(k, k == 'fallthrough') &&
          variables.kinds[1][1].exists_one(k, k == 'no_reverse') &&
          variables.kinds[1][1].filter(k, k == 'ttl').size() <= 1)
      messageExpression: |-
        'kube-system/coredns-custom key ' + variables.ownKey +
        ' may hold only the registration engine\'s hosts block: "hosts {", entries "<unicast IP> <name under ' +
        variables.domains.join(', ') + '>", at most one "ttl <1..3600>", one bare "no_reverse", one bare "fallthrough", and "}"'
    # coredns: at most one of the engine's entries in the hosts blocks that
    # answer reverse queries, or no more than there were.
    - expression: |-
        object.metadata.name != 'coredns' ||
        variables.sharedEntries[1] <= 1 || variables.sharedEntries[1] <= variables.sharedEntries[0]
      messageExpression: |-
        'the registration engine keeps one hosts entry under ' + variables.domains.join(', ') +
        ' in a hosts block of kube-system/coredns\'s Corefile that answers reverse (PTR) queries (one without no_reverse), its update server\'s; this edit leaves ' +
        string(variables.sharedEntries[1]) + ', each renaming its address in reverse lookups'
    # coredns: the Corefile's other lines stay; or the engine adds its hosts
    # block (no_reverse and a bare fallthrough; the entries and ttl being
    # its own lines) as the first directive of the root server block of a
    # Corefile that had no hosts directive (CoreDNS allows one per server
    # block).
    - expression: |-
        object.metadata.name != 'coredns' ||
        variables.kept[1] == variables.kept[0] ||
        (!variables.texts[0].split('\n').exists(l, l.trim().split(' ')[0] == 'hosts' || l.trim().startsWith('hosts{') || l.trim().startsWith('hosts\t')) &&
          variables.kept[1].size() == variables.kept[0].size() + 2 &&
          variables.kept[1].exists(r, p, r > 0 && r + 2 < variables.kept[1].size() &&
            variables.hostsOpen[1][r + 1] &&
            variables.kept[1][r + 1].map(l, l.trim()) == ['{', 'no_reverse', 'fallthrough', ''] &&
            p.size() == 2 && p[0].trim() == '{' && p[1].trim() == 'hosts' &&
            p[0] == variables.kept[0][r][0] &&
            variables.kept[1][r + 2][0].trim() == '}' &&
            variables.kept[1][r + 2].transformList(i, l, i > 0, l) == variables.kept[0][r].transformList(i, l, i > 0, l) &&
            variables.kept[1].transformList(i, q, i < r, q) == variables.kept[0].transformList(i, q, i < r, q) &&
            variables.kept[1].transformList(i, q, i > r + 2, q) == variables.kept[0].transformList(i, q, i > r, q) &&
            (r == 1 || variables.kept[1][r - 1].size() >= 2) &&
            variables.kept[1][r - 1][variables.kept[1][r - 1].size() - 1].trim().split(' ').exists(z, z in ['.', '.:53', 'dns://.', 'dns://.:53']) &&
            variables.pieces[1].transformList(i, q, i > 0 && i < r, q.startsWith('{') ? 1 : -1).sum() == 0))
      messageExpression: |-
        'the registration engine may change in kube-system/coredns\'s Corefile only hosts entries "<unicast IP> <name under ' +
        variables.domains.join(', ') + '>" (in a hosts block without no_reverse, none for a private, shared or loopback address) and a "ttl <1..3600>" inside a hosts block, or add a hosts block with no_reverse and a bare fallthrough at the top of the root server block; every other line must stay as it is'
    {{- if $removeOnly }}
    # The uninstall hook's copy: its token only removes (registration-engine
    # cleanup). In coredns-custom the engine's key may go or stay as it is;
    # in the Corefile every entry, ttl line and zone under domains of a
    # hosts block is one that block already had, and no block is added.
    - expression: |-
        object.metadata.name == 'coredns-custom' ?
          (!(variables.ownKey in variables.newData) ||
            (variables.ownKey in variables.oldData && variables.oldData[variables.ownKey] == variables.newData[variables.ownKey])) :
          (variables.frags[1].size() == variables.frags[0].size() &&
            variables.frags[1].all(k, fs, fs.all(i, l,
              (!variables.own[1][k][i] || l.trim() in variables.frags[0][k].map(o, o.trim())) &&
              (!(k + 1 < variables.frags[1].size() && i == fs.size() - 1 && variables.hostsOpen[1][k + 1]) ||
                variables.words[1][k][i].all(j, w, j < 2 || !variables.named[1][k][i][j] ||
                  w in variables.words[0][k][variables.words[0][k].size() - 1])))))
      messageExpression: |-
        'the registration engine\'s uninstall hook may only remove the engine\'s hosts entries from kube-system/' + object.metadata.name +
        ' (its key ' + variables.ownKey + ' in coredns-custom; its entries, ttl lines and zones under ' + variables.domains.join(', ') + ' in the Corefile), never write one'
    {{- end }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ $policy }}
  labels:
    {{- include "registration-engine.labels" . | nindent 4 }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  policyName: {{ $policy }}
  validationActions: [Deny]
{{- end }}
{{- end }}
