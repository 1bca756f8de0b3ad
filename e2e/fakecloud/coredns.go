package fakecloud

// KubeadmCorefile is the Corefile kubeadm and kind put into the
// kube-system/coredns ConfigMap. It carries the reload plugin, so an added
// hosts entry takes effect without a restart. Tests of the engine's
// in-cluster DNS start from it, as a real cluster would.
const KubeadmCorefile = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
`

// AKSCorefile is the Corefile of AKS's kube-system/coredns ConfigMap (AKS's
// coredns-custom documentation): it imports every coredns-custom key ending
// in .override into the root block and every one ending in .server beside
// it, and reloads. AKS's addon manager reverts any edit to it.
const AKSCorefile = `.:53 {
    errors
    ready
    health {
      lameduck 5s
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
      ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
    loadbalance
    import custom/*.override
}
import custom/*.server
`
